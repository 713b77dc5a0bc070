// Governance benchmark runner (`npm run bench:governance`): policy decisions, SQL classification and personal-data scanning, each printed with its ratio to a baseline measured in the same run.
import { bench as benchPolicy } from './governance-policy.js';
import { bench as benchSql } from './governance-sql.js';
import { bench as benchPii } from './governance-pii.js';

console.log(`gatehouse governance benchmark — node ${process.versions.node}, ${new Date().toISOString()}`);
await benchPolicy();
await benchSql();
await benchPii();
