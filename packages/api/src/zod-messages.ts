// The schemas use zod's functional API (`zod/mini`): it is tree-shaken to what they use, where the method-chaining
// API loads all of zod and builds every method of every schema as a closure of its own (decision 031). It carries no
// messages of its own; this gives it zod's English ones, which a Kyma's status and the admission answers quote.
// Loaded by crd.ts, which every schema imports; zod keeps the setting for the whole process.
import { config } from 'zod/mini';
import en from 'zod/v4/locales/en.js';

config(en());
