// Preload (`node --require`, after ../loopback.cjs) that makes listen() on an IP literal bind
// synchronously, as listen() without a host does.
//
// loopback.cjs turns `listen(0)` into `listen(0, '127.0.0.1')`. Given a host, node resolves it
// with dns.lookup first, which answers asynchronously even for an IP literal, so the socket is
// not bound yet when listen() returns. Programs that read `server.address().port` right after
// `listen(0)` (several mock servers of the MCP conformance suite do) then find null. While a
// listen() call runs, this answers dns.lookup of an IP literal at once, so node binds within
// the call. Every other lookup is left alone.
'use strict';
const dns = require('dns');
const net = require('net');

const lookup = dns.lookup;
let listening = 0;
dns.lookup = function (hostname, options, callback) {
  const cb = typeof options === 'function' ? options : callback;
  const family = typeof hostname === 'string' ? net.isIP(hostname) : 0;
  if (listening > 0 && family !== 0 && typeof cb === 'function') {
    if (options && typeof options === 'object' && options.all) {
      cb(null, [{ address: hostname, family }]);
    } else {
      cb(null, hostname, family);
    }
    return {};
  }
  return lookup.apply(this, arguments);
};

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  listening++;
  try {
    return listen.apply(this, args);
  } finally {
    listening--;
  }
};
