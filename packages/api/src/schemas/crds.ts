// Every kind whose CRD `npm run generate` writes to manifests/crds/ (packages/api/scripts/generate-crds.ts).
// A new kind: its schema and `customResource(...)` in its own file here, and one line below.
import { moduleReleaseMetaCrd, moduleTemplateCrd } from './catalog.js';
import type { CustomResourceSource } from './crd.js';
import { kymaCrd } from './kyma.js';
import { manifestCrd } from './manifest.js';
import { moduleConfigCrd, syncResourceCrd } from './mirrors.js';
import { watcherCrd } from './watcher.js';

export const CRDS: readonly CustomResourceSource[] = [
  kymaCrd,
  moduleTemplateCrd,
  moduleReleaseMetaCrd,
  watcherCrd,
  moduleConfigCrd,
  syncResourceCrd,
  manifestCrd,
];
