// Shell completion. The scripts are thin: they hand the words typed so far to the hidden `__complete` command,
// which knows the commands, flags and, from the caller's KCP, the Kyma names.
import { OUTPUT_FORMATS } from './output.js';

export const SHELLS = ['bash', 'zsh'] as const;
export type Shell = (typeof SHELLS)[number];

/** Subcommands and their own flags; the global ones are accepted everywhere. */
export const COMMAND_FLAGS: Record<string, string[]> = {
  status: ['--output', '--watch', '--interval'],
  explain: ['--output', '--events'],
  pause: ['--reason'],
  resume: ['--reason'],
  reconcile: ['--reason', '--wait'],
  completion: [],
};
/** Subcommands whose one argument is a Kyma. */
export const KYMA_COMMANDS = new Set(['explain', 'pause', 'resume', 'reconcile']);
export const GLOBAL_FLAGS = ['--kubeconfig', '--context', '--namespace', '--help', '--version'];
/** Flags that take a value, so the word after them is not a positional argument. */
const VALUE_FLAGS = new Set([
  '--kubeconfig',
  '--context',
  '-n',
  '--namespace',
  '-o',
  '--output',
  '--interval',
  '--events',
  '--reason',
  '--wait',
]);

export function completionScript(shell: Shell): string {
  if (shell === 'bash') {
    return `# kubectl-skr completion for bash: source <(kubectl-skr completion bash)
_kubectl_skr() {
  local IFS=$'\\n'
  COMPREPLY=($(kubectl-skr __complete "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _kubectl_skr kubectl-skr
`;
  }
  return `#compdef kubectl-skr
# kubectl-skr completion for zsh: source <(kubectl-skr completion zsh)
_kubectl_skr() {
  local -a candidates
  candidates=("\${(@f)$(kubectl-skr __complete "\${(@)words[2,CURRENT]}" 2>/dev/null)}")
  compadd -- "\${candidates[@]}"
}
compdef _kubectl_skr kubectl-skr
`;
}

/** Where the caller's words point: which flag values to pass on to a lookup of Kyma names. */
export interface CompletionQuery {
  /** Candidates known without a cluster; undefined when Kyma names are wanted. */
  candidates?: string[];
  /** The current word, which every candidate must start with. */
  current: string;
  /** Wanted: Kyma names (or contexts) from the caller's kubeconfig and KCP. */
  wants?: 'kymas' | 'contexts';
  connection: { kubeconfig?: string; context?: string; namespace?: string };
}

/** Reads the words typed after `kubectl-skr` (the last is the one being completed). */
export function completionQuery(words: string[]): CompletionQuery {
  const current = words.at(-1) ?? '';
  const before = words.slice(0, -1);
  const connection: CompletionQuery['connection'] = {};
  const positionals: string[] = [];
  for (let i = 0; i < before.length; i++) {
    const word = before[i]!;
    const [flag, inline] =
      word.startsWith('--') && word.includes('=') ? word.split('=', 2) : [word, undefined];
    if (VALUE_FLAGS.has(flag!)) {
      const value = inline ?? before[++i];
      if (flag === '--kubeconfig' && value !== undefined) connection.kubeconfig = value;
      if (flag === '--context' && value !== undefined) connection.context = value;
      if ((flag === '-n' || flag === '--namespace') && value !== undefined) connection.namespace = value;
    } else if (!word.startsWith('-')) {
      positionals.push(word);
    }
  }
  const previous = before.at(-1);
  const command = positionals[0];
  if (previous === '-o' || previous === '--output')
    return { candidates: [...OUTPUT_FORMATS], current, connection };
  if (previous === '--context') return { wants: 'contexts', current, connection };
  if (previous !== undefined && VALUE_FLAGS.has(previous)) return { candidates: [], current, connection };
  if (current.startsWith('-')) {
    return {
      candidates: [...(command ? (COMMAND_FLAGS[command] ?? []) : []), ...GLOBAL_FLAGS],
      current,
      connection,
    };
  }
  if (command === undefined) return { candidates: Object.keys(COMMAND_FLAGS), current, connection };
  if (command === 'completion' && positionals.length === 1)
    return { candidates: [...SHELLS], current, connection };
  if (KYMA_COMMANDS.has(command) && positionals.length === 1) return { wants: 'kymas', current, connection };
  return { candidates: [], current, connection };
}
