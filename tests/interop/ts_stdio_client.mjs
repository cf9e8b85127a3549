// The TypeScript SDK client, v1 (@modelcontextprotocol/sdk) or v2 (@modelcontextprotocol/client),
// against a trio-mcp server it launches over stdio (tests/interop/test_interop_stdio.py).
//
// usage: node ts_stdio_client.mjs <node_modules dir> <v1 | v2 | v2-auto> <command> [args...]
//
// v2-auto: the v2 client with versionNegotiation {mode: "auto"}, which probes server/discover
// and speaks 2026-07-28 to a server that offers it.
//
// Lists tools, resources and prompts, reads one resource, gets one prompt, calls echo, a tool
// that asks the user for input (answered by the elicitation handler), and one with progress.
// Prints one JSON line with what each gave.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [nodeModules, flavour, command, ...args] = process.argv.slice(2);
const load = (path) => import(pathToFileURL(join(nodeModules, path)).href);
let Client, StdioClientTransport, ElicitRequestSchema;
if (flavour === 'v1') {
    ({ Client } = await load('@modelcontextprotocol/sdk/dist/esm/client/index.js'));
    ({ StdioClientTransport } = await load('@modelcontextprotocol/sdk/dist/esm/client/stdio.js'));
    ({ ElicitRequestSchema } = await load('@modelcontextprotocol/sdk/dist/esm/types.js'));
} else {
    ({ Client } = await load('@modelcontextprotocol/client/dist/index.mjs'));
    ({ StdioClientTransport } = await load('@modelcontextprotocol/client/dist/stdio.mjs'));
}

const options = { capabilities: { elicitation: { form: {} } } };
if (flavour === 'v2-auto') options.versionNegotiation = { mode: 'auto' };
const client = new Client({ name: `trio-mcp-ts-stdio-${flavour}`, version: '1.0.0' }, options);
const questions = [];
const answer = async (request) => {
    questions.push(request.params.message);
    return { action: 'accept', content: { name: 'Ada' } };
};
client.setRequestHandler(flavour === 'v1' ? ElicitRequestSchema : 'elicitation/create', answer);
const stderr = [];
const transport = new StdioClientTransport({ command, args, stderr: 'pipe' });
transport.stderr?.on('data', (chunk) => stderr.push(chunk.toString()));
await client.connect(transport);
const report = { version: client.getNegotiatedProtocolVersion?.() ?? null, questions };
report.server = client.getServerVersion().name;
report.tools = (await client.listTools()).tools.map((t) => t.name);
report.resources = (await client.listResources()).resources.map((r) => r.uri);
report.read = (await client.readResource({ uri: 'test://static-text' })).contents[0].text;
report.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
report.prompt = (await client.getPrompt({ name: 'test_simple_prompt' })).messages[0].content.text;
report.echo = (await client.callTool({ name: 'echo', arguments: { text: 'hi' } })).content[0].text;
report.elicited = (await client.callTool({
    name: 'test_input_required_result_elicitation', arguments: {},
})).content[0].text;
const progress = [];
const onprogress = { onprogress: (p) => progress.push(p.progress) };
// 0.25 s apart: the last progress and the answer never arrive in one read, where a client that
// dispatches notifications later than responses would drop the progress (seen under load).
const countdown = { name: 'countdown', arguments: { n: 3, interval: 0.25 } };
// v1's callTool takes a result schema before the options.
report.countdown = (await (flavour === 'v1'
    ? client.callTool(countdown, undefined, onprogress)
    : client.callTool(countdown, onprogress))).content[0].text;
report.progress = progress;
await client.close();
report.stderr = stderr.join('');
console.log(JSON.stringify(report));
