// The official TypeScript SDK v2 server (@modelcontextprotocol/server 2.4.0 with
// @modelcontextprotocol/node 2.1.2, the benchmarks' pinned packages) served stateless in
// 2026-07-28 as the benchmarks' peer is (benchmarks/servers/ts_sdk_v2/ts_sdk_v2_bench.mjs),
// with one of each feature a client uses: tools (one with progress), a resource, a prompt, a
// tool that asks the user (an input_required round: inputRequired.elicit) and a slow tool that
// says whether it was cancelled. For trio_mcp.Client's interop tests
// (tests/client/test_client_ts.py), which run it from a folder whose node_modules is the
// benchmarks' (node resolves packages from the script's own folder).
//
//     node ts_features.mjs --port PORT
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

import {
    localhostHostValidation,
    localhostOriginValidation,
    toNodeHandler,
} from '@modelcontextprotocol/node';
import {
    acceptedContent,
    createMcpHandler,
    inputRequired,
    McpServer,
} from '@modelcontextprotocol/server';
import * as z from 'zod/v4';

const { values } = parseArgs({
    options: { port: { type: 'string' }, host: { type: 'string', default: '127.0.0.1' } },
    strict: true,
});

// The tags of the slow calls that were cancelled, in order (one process, many requests).
const cancelled = [];
const nameSchema = z.object({ name: z.string() });

function factory() {
    const server = new McpServer({ name: 'ts-features', version: '1.0.0' });
    server.registerTool(
        'echo',
        { description: 'Return the text unchanged.', inputSchema: z.object({ text: z.string() }) },
        async ({ text }) => ({ content: [{ type: 'text', text }] }),
    );
    server.registerTool(
        'count',
        { description: 'Report progress 1..n of n, then return.',
          inputSchema: z.object({ n: z.number().int() }) },
        async ({ n }, ctx) => {
            const progressToken = ctx.mcpReq._meta?.progressToken;
            for (let i = 1; i <= n; i++) {
                if (progressToken !== undefined) {
                    await ctx.mcpReq.notify({
                        method: 'notifications/progress',
                        params: { progressToken, progress: i, total: n, message: `step ${i}` },
                    });
                }
            }
            return { content: [{ type: 'text', text: `counted ${n}` }] };
        },
    );
    server.registerResource(
        'greeting', 'test://greeting', { description: 'A fixed text.', mimeType: 'text/plain' },
        async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain',
                                       text: 'hello from the TypeScript SDK' }] }),
    );
    server.registerPrompt(
        'review',
        { description: 'Ask for a review of the code.', argsSchema: z.object({ code: z.string() }) },
        async ({ code }) => ({
            messages: [{ role: 'user', content: { type: 'text', text: `Please review: ${code}` } }],
        }),
    );
    server.registerTool(
        'greet',
        { description: "Ask the user's name, then greet them.", inputSchema: z.object({}) },
        async (_args, ctx) => {
            const answer = acceptedContent(ctx.mcpReq.inputResponses, 'name', nameSchema);
            if (answer === undefined) {
                return inputRequired({
                    inputRequests: {
                        name: inputRequired.elicit({ message: 'Who are you?',
                                                     requestedSchema: nameSchema }),
                    },
                });
            }
            return { content: [{ type: 'text', text: `hello ${answer.name}` }] };
        },
    );
    server.registerTool(
        'slow',
        { description: 'Wait a minute unless cancelled; a cancellation is recorded.',
          inputSchema: z.object({ tag: z.string() }) },
        async ({ tag }, ctx) => {
            const signal = ctx.mcpReq.signal;
            const outcome = await new Promise((resolve) => {
                const timer = setTimeout(() => resolve('not cancelled'), 60_000);
                signal?.addEventListener('abort', () => {
                    clearTimeout(timer);
                    cancelled.push(tag);
                    resolve('cancelled');
                });
            });
            return { content: [{ type: 'text', text: outcome }] };
        },
    );
    server.registerTool(
        'cancelled',
        { description: 'The tags of the slow calls cancelled so far.', inputSchema: z.object({}) },
        async () => ({ content: [{ type: 'text', text: cancelled.join(',') }] }),
    );
    return server;
}

const handler = createMcpHandler(factory, {
    onerror: (error) => console.error(`mcp handler: ${error?.stack ?? error}`),
});
const serve = toNodeHandler(handler);
const validateHost = localhostHostValidation();
const validateOrigin = localhostOriginValidation();
const httpServer = createServer(async (req, res) => {
    if (!validateHost(req, res) || !validateOrigin(req, res)) return;
    await serve(req, res);
});
httpServer.listen(Number(values.port), values.host);
for (const signal of ['SIGTERM', 'SIGINT']) {
    process.on(signal, () => {
        httpServer.close();
        httpServer.closeAllConnections();
        handler.close().finally(() => process.exit(0));
    });
}
