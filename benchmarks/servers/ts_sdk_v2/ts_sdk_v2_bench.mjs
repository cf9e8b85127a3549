// The TypeScript SDK v2 contender of benchmarks/run.py (`ts-sdk-v2/node`): the official
// TypeScript SDK's server (@modelcontextprotocol/server, pinned in package.json beside this
// file) served stateless on node's own HTTP server, as the SDK's HTTP serving guide shows:
// `createMcpHandler` over a per-request factory, wrapped once for node:http by
// `toNodeHandler` (@modelcontextprotocol/node), behind the localhost Host and Origin guards
// that package's README composes in front of a hand-wired node:http server.
//
//     node ts_sdk_v2_bench.mjs --port 8000 [--host 127.0.0.1]
//
// Everything else is the SDK's default: responseMode 'auto' (one JSON body unless the
// handler sends a related message first, then an SSE stream: the shape trio-mcp's and the
// Python SDK's modern paths answer with too), 2025-era requests served by its stateless
// fallback. Installed by benchmarks/servers/ts_sdk_v2.py (npm ci from package-lock.json).
//
// The tools are the other contenders' (benchmarks/servers/trio_mcp_bench.py, sdk_bench.py):
// `echo(text)` returns the text; `echo_progress(text)` first sends one progress notification
// (1 of 1, the text as its message) when the call carries a progress token.
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

import {
    localhostHostValidation,
    localhostOriginValidation,
    toNodeHandler,
} from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import * as z from 'zod/v4';

const { values } = parseArgs({
    options: {
        port: { type: 'string' },
        host: { type: 'string', default: '127.0.0.1' },
    },
    strict: true,
});
if (values.port === undefined) {
    console.error('usage: node ts_sdk_v2_bench.mjs --port PORT [--host HOST]');
    process.exit(2);
}

const textInput = z.object({ text: z.string() });

function factory() {
    const server = new McpServer({ name: 'bench-ts-sdk-v2', version: '1.0.0' });
    server.registerTool(
        'echo',
        { description: 'Return the text unchanged.', inputSchema: textInput },
        async ({ text }) => ({ content: [{ type: 'text', text }] }),
    );
    server.registerTool(
        'echo_progress',
        {
            description: 'Report one progress notification when the call has a progress '
                + 'token, then return the text unchanged.',
            inputSchema: textInput,
        },
        async ({ text }, ctx) => {
            const progressToken = ctx.mcpReq._meta?.progressToken;
            if (progressToken !== undefined) {
                await ctx.mcpReq.notify({
                    method: 'notifications/progress',
                    params: { progressToken, progress: 1, total: 1, message: text },
                });
            }
            return { content: [{ type: 'text', text }] };
        },
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
