// The stage arrays stay in step: preparation is a prefix of the decision stages, and the HTTP pipeline starts with all of them.
import { describe, expect, it } from 'vitest';
import { decisionStages, preparationStages } from '../../src/pipeline/decide.js';
import { httpExecutionStages, httpPipelineStages } from '../../src/pipeline/http.js';

describe('pipeline stage order', () => {
  it('prepares with every decision stage up to policy; rate limit, the write measurement and approval wait for execution (they need the parameters)', () => {
    expect(decisionStages.slice(0, preparationStages.length)).toEqual(preparationStages);
    expect(decisionStages.slice(preparationStages.length).map((s) => s.name)).toEqual(['rate_limit', 'write_estimate', 'approval']);
  });

  it('runs the shared decision stages before any HTTP execution stage, in spec §4 order', () => {
    expect(httpPipelineStages).toEqual([...decisionStages, ...httpExecutionStages]);
    expect(httpPipelineStages.map((s) => s.name)).toEqual([
      'validate_input', 'session_escape', 'authenticate', 'resolve_source', 'source_role', 'catalog', 'columns', 'policy', 'rate_limit', 'write_estimate', 'approval',
      'egress', 'cache_lookup', 'write_barrier', 'upstream', 'redact', 'cache_store', 'invalidate',
    ]);
  });
});
