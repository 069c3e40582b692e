// npm jayson 5 as its README serves it over HTTP, on a free loopback port printed on stdout.
// Started by tests/thirdparty/conftest.py; stops when its stdin closes.
const jayson = require("jayson");

const server = new jayson.Server({
  ping(args, callback) {
    callback(null, "pong");
  },
  add(args, callback) {
    callback(null, args[0] + args[1]);
  },
});

const http = server.http();
http.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${http.address().port}\n`);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
