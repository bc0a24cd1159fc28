// One HTTP request over a real socket, with the path sent as written (fetch would normalise it), for the servers'
// routing tests.
import { request } from 'node:http';

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export function send(port: number, method: string, path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, agent: false }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      // A connection cut in the middle of an answer.
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}
