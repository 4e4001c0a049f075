// Preload (`node --require`) for test peers launched by tests/src/peers.rs:
// - prints `READY <port>` on stdout once the first TCP server is listening
//   (so PORT=0 works: the OS picks, the launcher reads the real port);
// - with AGENTD_PEER_WATCH_STDIN=1, exits when stdin reaches EOF, so the peer
//   dies with the test process even if that one never runs its destructors.
'use strict';
const net = require('net');
const listen = net.Server.prototype.listen;
let announced = false;
net.Server.prototype.listen = function (...args) {
  this.once('listening', () => {
    const addr = this.address();
    if (!announced && addr && typeof addr === 'object') {
      announced = true;
      process.stdout.write(`READY ${addr.port}\n`);
    }
  });
  return listen.apply(this, args);
};
if (process.env.AGENTD_PEER_WATCH_STDIN === '1') {
  const bye = () => process.exit(0);
  process.stdin.on('end', bye);
  process.stdin.on('error', bye);
  process.stdin.resume();
}
