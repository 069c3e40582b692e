// Records HAR captures with Playwright's own HAR recorder driving Debian's Chromium.
//
// Usage: node browser_har.cjs PLAN.json
// PLAN: {"origin": "http://127.0.0.1:PORT", "posts": [{"path": "/", "body": "..."}],
//        "captures": [{"path": "/abs/x.har", "content": "embed"|"omit"|"attach"}]}
// One browser launch; one context per capture, each loading the same page at the origin
// (served by a route, since the JSON-RPC server answers only POST), whose script sends the
// posts one after the other with fetch and reads every reply whole.  Closing the context is
// what makes Playwright write the HAR (and, for "attach", its side files or its .zip).
"use strict";
const fs = require("fs");
const path = require("path");

const modulePath = path.join(__dirname, "..", "servers", "node_modules", "playwright-core");
const { chromium } = require(modulePath);

const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

function page(posts) {
  // The favicon link keeps Chromium from asking the server for /favicon.ico.
  return `<!doctype html><html><head><link rel="icon" href="data:,"></head><body><script>
const posts = ${JSON.stringify(posts)};
(async () => {
  const seen = [];
  for (const p of posts) {
    try {
      const r = await fetch(p.path, {method: "POST", body: p.body,
                                     headers: {"Content-Type": p.type || "application/json"}});
      seen.push([r.status, (await r.text()).length]);
    } catch (e) {
      seen.push([0, String(e)]);
    }
  }
  window.pairwatchDone = seen;
})();
</script></body></html>`;
}

async function main() {
  const plan = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  const browser = await chromium.launch({
    executablePath: plan.executable || "/usr/bin/chromium",
    args: FLAGS,
    headless: true,
  });
  const results = [];
  try {
    for (const capture of plan.captures) {
      const context = await browser.newContext({
        recordHar: { path: capture.path, content: capture.content },
      });
      const tab = await context.newPage();
      await tab.route(plan.origin + "/app", (route) =>
        route.fulfill({ status: 200, contentType: "text/html", body: page(plan.posts) }),
      );
      await tab.goto(plan.origin + "/app");
      await tab.waitForFunction(() => window.pairwatchDone !== undefined, null, {
        timeout: 60000,
      });
      results.push(await tab.evaluate(() => window.pairwatchDone));
      await context.close();
    }
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(results) + "\n");
}

main().catch((err) => {
  process.stderr.write(String((err && err.stack) || err) + "\n");
  process.exit(1);
});
