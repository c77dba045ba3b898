// Loaded into every test process by scripts/run-tests.mjs (`--import`): before each test, within
// 30 s of a UTC midnight, wait until just past it. Many tests count calls against "today" (usage,
// analytics, daily limits and their notices, C11) and read it back; a test must not make its calls
// on one day and its reads on the next.
import { beforeEach } from 'node:test';
import { clearOfMidnight } from './wait.ts';

beforeEach(() => clearOfMidnight());
