import { connect } from 'node:net';

/** Whether a connection to the port on 127.0.0.1 is refused right now. */
export function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

/** Resolves once a connection to the port is refused (a listener closing), trying again after each accepted one. */
export async function untilRefused(port: number): Promise<void> {
  while (!(await refused(port)));
}

/** Environment for a `posthorn` child process whose three listeners take free ports on loopback. */
export const LOOPBACK_LISTENERS_ENV: Readonly<Record<string, string>> = {
  POSTHORN_HTTP_HOST: '127.0.0.1',
  POSTHORN_HTTP_PORT: '0',
  POSTHORN_INBOUND_HOST: '127.0.0.1',
  POSTHORN_INBOUND_PORT: '0',
  POSTHORN_SUBMISSION_HOST: '127.0.0.1',
  POSTHORN_SUBMISSION_PORT: '0',
};
