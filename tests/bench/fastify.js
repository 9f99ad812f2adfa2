// make bench's fastify peer: fastify with @fastify/rate-limit on Redis
// (ioredis), one process, serving BENCH_FILE's bytes at /bench/item as
// application/json. The limit (BENCH_LIMIT per second per client address)
// is meant never to deny, as rlgate's rules in the bench: every request
// is counted in Redis and admitted.
//   BENCH_PORT=8081 REDIS_PORT=6379 BENCH_FILE=item.json node fastify.js
'use strict';
const fs = require('fs');
const Redis = require('ioredis');
const fastify = require('fastify')({ logger: false });

const env = process.env;
const body = fs.readFileSync(env.BENCH_FILE);
const redis = new Redis({ host: '127.0.0.1', port: Number(env.REDIS_PORT),
	connectTimeout: 500, maxRetriesPerRequest: 1 });

async function main() {
	await fastify.register(require('@fastify/rate-limit'), {
		max: Number(env.BENCH_LIMIT || 1e9), timeWindow: 1000, redis,
		nameSpace: 'bench-fastify:' });
	fastify.get('/bench/item', (req, reply) => {
		reply.type('application/json').send(body);
	});
	await fastify.listen({ port: Number(env.BENCH_PORT), host: '127.0.0.1' });
}
main().catch((e) => { console.error(e); process.exit(1); });
process.on('SIGTERM', () => fastify.close().then(() => { redis.quit(); }));
