/** A test's own Redis Cluster (three primaries on loopback): the bench's launcher, shared. */
export { type OwnRedisCluster, startRedisCluster } from '../../bench/redis-cluster.ts';
export { hasRedisServer } from './redis-server.ts';
