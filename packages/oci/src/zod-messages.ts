// The OCI documents (dockerconfigjson, OCI manifests, OCM component descriptors) are checked with zod's functional
// API (`zod/mini`), which carries only what the schemas use instead of all of zod with every method of every schema
// built as a closure of its own. It has no messages of its own ("Invalid input" for everything); this gives it zod's
// English ones, which reach users in the Misconfigured and MalformedDescriptor errors of a module source.
// Imported for its effect by every file here that declares a schema; zod keeps the setting for the whole process.
import { config } from 'zod/mini';
import en from 'zod/v4/locales/en.js';

config(en());
