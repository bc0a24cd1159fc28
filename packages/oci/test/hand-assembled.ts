// Component versions assembled by hand, on a code path that shares nothing with src/publish.ts: plain fetch
// pushes, a tar writer of its own, descriptors written as text. Tests use it to stand in for other tools
// (modulectl + ocm, the old kyma CLI) and to store what no honest tool would (hostile archives and descriptors).
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { isModuleSourceError, type ModuleSourceError, type ModuleSourceReason } from '../src/index.js';

export const sha256 = (data: Buffer | string) => `sha256:${createHash('sha256').update(data).digest('hex')}`;

export interface Blob {
  mediaType: string;
  digest: string;
  size: number;
}

/** One tar entry: a file by default; `type: '2'` is a symlink to `link`. */
export interface HandTarEntry {
  name: string;
  data?: string | Buffer;
  type?: '0' | '2' | '5';
  link?: string;
}

function field(value: string, length: number): Buffer {
  const out = Buffer.alloc(length);
  out.write(value, 'utf8');
  return out;
}

function octal(value: number, length: number): Buffer {
  return field(value.toString(8).padStart(length - 1, '0'), length);
}

/** A ustar archive written byte by byte (no library), so it can hold names a library would refuse. */
export function handTar(entries: HandTarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const entry of entries) {
    const data = Buffer.from(entry.data ?? '');
    const header = Buffer.concat([
      field(entry.name, 100),
      octal(0o644, 8),
      octal(0, 8),
      octal(0, 8),
      octal(entry.type === '2' || entry.type === '5' ? 0 : data.length, 12),
      octal(0, 12),
      Buffer.from('        '), // checksum placeholder
      field(entry.type ?? '0', 1),
      field(entry.link ?? '', 100),
      field('ustar\u000000', 8),
      field('', 32),
      field('', 32),
      octal(0, 8),
      octal(0, 8),
      field('', 155),
      Buffer.alloc(12),
    ]);
    let sum = 0;
    for (const byte of header) sum += byte;
    header.write(`${sum.toString(8).padStart(6, '0')}\u0000 `, 148, 'latin1');
    parts.push(header);
    if (entry.type !== '2' && entry.type !== '5') {
      parts.push(data, Buffer.alloc((512 - (data.length % 512)) % 512));
    }
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

/** POSTs a blob in one request (monolithic upload). */
export async function pushBlob(
  url: string,
  repository: string,
  data: Buffer,
  mediaType: string,
): Promise<Blob> {
  const digest = sha256(data);
  const response = await fetch(`${url}/v2/${repository}/blobs/uploads/?digest=${digest}`, {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream' },
    body: data,
  });
  expect(response.status, await response.text()).to.equal(201);
  return { mediaType, digest, size: data.length };
}

export interface HandComponent {
  /** registry URL (http://host:port) */
  url: string;
  /** e.g. component-descriptors/kyma-project.io/module/x */
  repository: string;
  tag: string;
  /** The descriptor text, with `{{name}}` replaced by each layer's digest (`{{raw-manifest}}`). */
  descriptor: string;
  layers: { name: string; data: Buffer; mediaType: string }[];
  configMediaType?: string;
  manifestMediaType?: string;
  /** Store the descriptor tar gzip-compressed, or as the plain YAML document. */
  descriptorLayer?: 'tar' | 'yaml';
}

/** Pushes a component version: layers, descriptor layer, config, manifest. Returns the layers by name. */
export async function pushComponent(component: HandComponent): Promise<Record<string, Blob>> {
  const { url, repository } = component;
  const blobs: Record<string, Blob> = {};
  let descriptor = component.descriptor;
  for (const layer of component.layers) {
    blobs[layer.name] = await pushBlob(url, repository, layer.data, layer.mediaType);
    descriptor = descriptor.replaceAll(`{{${layer.name}}}`, blobs[layer.name]!.digest);
  }
  const descriptorBlob =
    component.descriptorLayer === 'yaml'
      ? await pushBlob(
          url,
          repository,
          Buffer.from(descriptor),
          'application/vnd.ocm.software.component-descriptor.v2+yaml',
        )
      : await pushBlob(
          url,
          repository,
          handTar([{ name: 'component-descriptor.yaml', data: descriptor }]),
          'application/vnd.ocm.software.component-descriptor.v2+yaml+tar',
        );
  const config = await pushBlob(
    url,
    repository,
    Buffer.from(JSON.stringify({ componentDescriptorLayer: descriptorBlob })),
    component.configMediaType ?? 'application/vnd.ocm.software.component.config.v1+json',
  );
  const manifestMediaType = component.manifestMediaType ?? 'application/vnd.oci.image.manifest.v1+json';
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: manifestMediaType,
    config,
    layers: [descriptorBlob, ...component.layers.map((l) => blobs[l.name]!)],
  });
  const response = await fetch(`${url}/v2/${repository}/manifests/${component.tag}`, {
    method: 'PUT',
    headers: { 'content-type': manifestMediaType },
    body: manifest,
  });
  expect(response.status, await response.text()).to.equal(201);
  return blobs;
}

/** A v2 descriptor whose resources are given as YAML list items (indented by 2). */
export function v2Descriptor(name: string, version: string, resources: string): string {
  return `meta:
  schemaVersion: v2
component:
  name: ${name}
  version: ${version}
  provider: kyma-project.io
  repositoryContexts:
  - type: OCIRegistry
    baseUrl: registry.example
    componentNameMapping: urlPath
  componentReferences: []
  sources: []
  resources:
${resources}`;
}

/** A raw-manifest resource as modulectl writes it (directoryTree, tar), pointing at layer `{{raw-manifest}}`. */
export const RAW_MANIFEST_TAR_RESOURCE = `  - name: raw-manifest
    type: directoryTree
    relation: local
    version: 1.0.0
    access:
      type: localBlob
      localReference: "{{raw-manifest}}"
      mediaType: application/x-tar
      referenceName: raw-manifest
`;

export const CONFIGMAP_YAML = `apiVersion: v1
kind: ConfigMap
metadata:
  name: hand-made
  namespace: default
data:
  made-by: hand
`;

/** The ModuleSourceError `promise` rejects with (of `reason`, when given). */
export async function failure(
  promise: Promise<unknown>,
  reason?: ModuleSourceReason,
): Promise<ModuleSourceError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isModuleSourceError(error), `expected a ModuleSourceError, got ${String(error)}`).to.equal(true);
  if (reason) expect((error as ModuleSourceError).reason, (error as Error).message).to.equal(reason);
  return error as ModuleSourceError;
}
