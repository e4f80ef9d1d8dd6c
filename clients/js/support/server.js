// A real service for the tests: `python -m service` on a free loopback port, ready
// (/readyz answers 200) before it is returned. The interpreter is $SERVICE_PYTHON, else the
// repository's .venv/bin/python. If the service cannot start, this throws: the tests fail.

import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** How long a test waits for the service, in milliseconds: minutes, so that a loaded
 *  machine never decides a test's outcome, while a hang still ends. */
export const WAIT = 300000;

export const REPOSITORY = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

function freePort() {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
  });
}

/** Start the service; `{url, stop}`. */
export async function startService(env = {}) {
  const python = process.env.SERVICE_PYTHON ?? resolve(REPOSITORY, ".venv/bin/python");
  const port = await freePort();
  const child = spawn(python, ["-m", "service"], {
    cwd: REPOSITORY,
    env: { ...process.env, PE_HOST: "127.0.0.1", PE_PORT: String(port), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  let exited = null;
  child.on("exit", (code, signal) => (exited = code ?? signal));
  child.on("error", (error) => (exited = error.message));
  const url = `http://127.0.0.1:${port}`;
  const stop = () =>
    new Promise((done) => {
      if (exited !== null) return done();
      child.once("exit", () => done());
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGKILL"), 15000).unref();
    });
  // minutes: a loaded machine never decides a test's outcome, and a hang still ends
  const deadline = Date.now() + WAIT;
  while (Date.now() < deadline) {
    if (exited !== null) {
      throw new Error(`the service (${python} -m service) exited with ${exited}:\n${output}`);
    }
    try {
      const response = await fetch(`${url}/readyz`);
      if (response.status === 200) return { url, stop };
    } catch {
      // not listening yet
    }
    await new Promise((done) => setTimeout(done, 50));
  }
  await stop();
  throw new Error(`the service did not answer ${url}/readyz with 200 within ${WAIT / 1000} s:\n${output}`);
}
