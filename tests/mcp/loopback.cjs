// Preloaded with `node --require` by the MCP tests: server-everything calls listen(PORT)
// without a host, which binds every interface.  Insert 127.0.0.1 as the host whenever a
// listen() call gives a port and no host, so test servers stay on loopback.
"use strict";
const net = require("net");
const listen = net.Server.prototype.listen;
const isPort = (v) => typeof v === "number" || (typeof v === "string" && /^\d+$/.test(v));
net.Server.prototype.listen = function (...args) {
  if (isPort(args[0]) && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
