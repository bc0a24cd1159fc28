// What KcpPkiSecrets.fromKubeconfig loads on demand: only these two classes, so a bundler that meets the dynamic
// import keeps just them (a dynamic import of the whole package keeps every API group and model of client-node).
export { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
