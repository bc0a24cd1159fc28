// Which socket peers may speak for a client certificate in gateway mode (X-Forwarded-Client-Cert).
import { BlockList, isIP } from 'node:net';

export interface TrustedProxies {
  /** True when the socket peer address is one of the configured proxies. */
  trusts(address: string | undefined): boolean;
}

/** Builds the matcher from IPs and CIDRs (`10.0.0.7`, `10.0.0.0/8`, `fd00::/8`); throws on a bad entry. */
export function trustedProxies(entries: readonly string[]): TrustedProxies {
  if (entries.length === 0) {
    throw new Error('gateway mode needs at least one trusted proxy (IP or CIDR); none were given');
  }
  const list = new BlockList();
  for (const raw of entries) {
    const entry = raw.trim();
    const [address = '', prefixText, ...rest] = entry.split('/');
    const family = isIP(address);
    if (family === 0 || rest.length > 0) {
      throw new Error(`trusted proxy ${JSON.stringify(raw)} is neither an IP address nor a CIDR`);
    }
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (prefixText === undefined) {
      list.addAddress(address, type);
      continue;
    }
    const prefix = /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : Number.NaN;
    if (!(prefix >= 0 && prefix <= (family === 4 ? 32 : 128))) {
      throw new Error(`trusted proxy ${JSON.stringify(raw)} has an invalid prefix length`);
    }
    list.addSubnet(address, prefix, type);
  }
  return {
    trusts(address) {
      if (!address) return false;
      const family = isIP(address);
      if (family === 0) return false;
      // BlockList matches IPv4-mapped IPv6 peers (`::ffff:10.0.0.7`) against IPv4 rules itself.
      return list.check(address, family === 4 ? 'ipv4' : 'ipv6');
    },
  };
}
