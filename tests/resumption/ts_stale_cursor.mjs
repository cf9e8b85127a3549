// The TypeScript SDK client against a stale cursor (tests/resumption/test_resume_ts.py).
//
// usage: node ts_stale_cursor.mjs <mcp-url> <node_modules dir> <tool arguments as JSON>
//
// Calls the server's `outrun` tool, whose connection the server closes and whose stream then
// outruns the replay window while the client waits `retry` ms. Prints one JSON line: how the
// call ended, how long it took, what the client saw, and every HTTP request the transport
// made (to show its reconnections), then exits.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [url, nodeModules, argsJson] = process.argv.slice(2);
const sdk = (path) => import(pathToFileURL(join(nodeModules, '@modelcontextprotocol/sdk/dist/esm', path)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { LoggingMessageNotificationSchema } = await sdk('types.js');

const requests = [];
const t0 = performance.now();
const ms = () => Math.round(performance.now() - t0);

// Every HTTP request the transport makes, with the resumption header, for the report.
const recordingFetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    requests.push({ at: ms(), method: init?.method ?? 'GET', lastEventId: headers.get('last-event-id') });
    return fetch(input, init);
};

const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
const transportErrors = [];
const client = new Client({ name: 'trio-mcp-ts-stale-cursor', version: '0' });
const logs = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    logs.push(n.params.data.i);
});

const report = { outcome: null, code: null, message: null, elapsedMs: null, logs, transportErrors, requests };
const watchdog = setTimeout(() => {
    report.outcome = 'timeout';
    console.log(JSON.stringify(report));
    process.exit(0);
}, Number(process.env.WATCHDOG_MS ?? 20000));

await client.connect(transport);
transport.onerror = (error) => transportErrors.push({ at: ms(), message: String(error?.message ?? error) });
const started = performance.now();
try {
    await client.callTool({ name: 'outrun', arguments: JSON.parse(argsJson) });
    report.outcome = 'resolved';
} catch (error) {
    report.outcome = 'rejected';
    report.code = error?.code ?? null;
    report.message = String(error?.message ?? error);
}
report.elapsedMs = Math.round(performance.now() - started);
report.rejectedAt = ms();
// Stay a little to see what the transport does after the call failed.
await new Promise((resolve) => setTimeout(resolve, Number(process.env.LINGER_MS ?? 0)));
clearTimeout(watchdog);
await client.close();
console.log(JSON.stringify(report));
process.exit(0);
