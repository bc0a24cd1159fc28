// The CRDs in manifests/crds/ are what `npm run generate` writes from the zod schemas (decision 018), and the
// generator keeps the agent's own checks out of them.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'chai';
import { z } from 'zod';
import { CRDS, crd } from '../src/index.js';
import { CRD_DIR, openApiSchemaOf, renderCrds } from '../scripts/generate-crds.js';

describe('generated CRDs', function () {
  this.timeout(60_000);

  it('manifests/crds/ holds exactly what npm run generate writes (run it after editing packages/api/src/schemas)', async () => {
    const rendered = await renderCrds();
    expect([...rendered.keys()].sort()).to.deep.equal(CRDS.map((source) => source.file).sort());
    for (const [file, text] of rendered) {
      const committed = await readFile(join(CRD_DIR, file), 'utf8');
      expect(committed, `${file} is stale: run npm run generate`).to.equal(text);
    }
  });

  it('tells the API server the registered facts and not the agent-only checks', () => {
    const schema = z.object({
      name: z.string().min(1, 'is required').register(crd, { maxLength: 8, description: 'a name' }),
      size: z.number().register(crd, { type: 'integer', format: 'int64' }),
      labels: z.record(z.string(), z.string()),
      data: z.record(z.string(), z.unknown()),
      state: z.union([z.enum(['Ready', 'Error']), z.literal('')]).optional(),
    });
    expect(openApiSchemaOf(schema, 'test')).to.deep.equal({
      type: 'object',
      required: ['name', 'size', 'labels', 'data'],
      properties: {
        name: { type: 'string', description: 'a name', maxLength: 8 },
        size: { type: 'integer', format: 'int64' },
        labels: { type: 'object', additionalProperties: { type: 'string' } },
        data: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
        state: { type: 'string', enum: ['Ready', 'Error', ''] },
      },
    });
  });

  it('refuses a field it cannot describe to the API server', () => {
    expect(() => openApiSchemaOf(z.object({ anything: z.unknown() }), 'test')).to.throw(
      /test\.anything: no type/,
    );
  });
});
