// Names of Manifests: upstream lifecycle-manager's scheme, so a Manifest
// upstream wrote for a module is found under the name this project would give it, and adopted instead of doubled.
import { MANIFEST } from './constants.js';

/** FNV-1 (not FNV-1a: multiply, then xor) over the UTF-8 bytes, 32 bits, as Go's hash/fnv.New32. */
export function fnv1Hash32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    hash = Math.imul(hash, 0x01000193) >>> 0;
    hash = (hash ^ byte) >>> 0;
  }
  return hash;
}

/**
 * `<kyma>-<last segment of the component name>-<FNV-1 of component name + module name>`, cut to 62 characters
 * (trailing dashes trimmed) when it reaches 63, which may cut the hash too, as upstream does.
 */
export function manifestName(ocmComponentName: string, kymaName: string, moduleName: string): string {
  const segment = ocmComponentName.slice(ocmComponentName.lastIndexOf('/') + 1);
  const name = `${kymaName}-${segment}-${fnv1Hash32(ocmComponentName + moduleName)}`;
  if (name.length <= MANIFEST.nameLimit) return name;
  return name.slice(0, MANIFEST.nameLimit).replace(/-+$/, '');
}
