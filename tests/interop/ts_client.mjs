// The TypeScript SDK v2 client (@modelcontextprotocol/client) against trio-mcp
// (tests/interop/test_interop_ts.py).
//
// usage: node ts_client.mjs <mcp-url> <node_modules dir> <mode: auto | legacy>
//
// Connects with the given version negotiation, then lists the tools, calls echo, calls a
// tool that asks the user for input (answered by the elicitation handler), and calls one
// with progress. Prints one JSON line with the negotiated version and what each call gave,
// and every HTTP request the transport made (method, MCP method, session header).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [url, nodeModules, mode] = process.argv.slice(2);
const lib = await import(pathToFileURL(join(nodeModules, '@modelcontextprotocol/client/dist/index.mjs')).href);
const { Client, StreamableHTTPClientTransport } = lib;

const requests = [];
const recordingFetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    let method = null;
    try { method = JSON.parse(init?.body ?? 'null')?.method ?? null; } catch { method = null; }
    requests.push({
        http: init?.method ?? 'GET',
        method,
        session: headers.get('mcp-session-id'),
        version: headers.get('mcp-protocol-version'),
    });
    return fetch(input, init);
};

const options = { capabilities: { elicitation: { form: {} } } };
if (mode === 'auto') options.versionNegotiation = { mode: 'auto' };
const client = new Client({ name: 'trio-mcp-ts-interop', version: '1.0.0' }, options);
const questions = [];
client.setRequestHandler('elicitation/create', async (request) => {
    questions.push(request.params.message);
    return { action: 'accept', content: { name: 'Ada' } };
});
await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch }));
const report = { version: client.getNegotiatedProtocolVersion(), questions, requests };
report.tools = (await client.listTools()).tools.map((t) => t.name);
report.echo = (await client.callTool({ name: 'echo', arguments: { text: 'hi' } })).content[0].text;
report.elicited = (await client.callTool({
    name: 'test_input_required_result_elicitation', arguments: {},
})).content[0].text;
const progress = [];
report.countdown = (await client.callTool(
    { name: 'countdown', arguments: { n: 3, interval: 0.01 } },
    { onprogress: (p) => progress.push(p.progress) },
)).content[0].text;
report.progress = progress;
await client.close();
console.log(JSON.stringify(report));
