// A minimal admission webhook for the ``webhooks`` bench case: every
// review is allowed, over HTTPS with keep-alive. Node.js, as the load
// generator, so that the webhook costs what a compiled one would and the
// figure is orchd's own overhead of calling it.
//
// Usage: node webhook_server.js --port PORT --cert CERT --key KEY
// Prints "ready" once listening.
'use strict';
const fs = require('fs');
const https = require('https');

const args = {};
for (let i = 2; i < process.argv.length; i += 2) {
  args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
}
const server = https.createServer({
  cert: fs.readFileSync(args.cert), key: fs.readFileSync(args.key), keepAliveTimeout: 60000,
}, (req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    const review = JSON.parse(Buffer.concat(chunks));
    const body = JSON.stringify({
      apiVersion: review.apiVersion, kind: 'AdmissionReview',
      response: {uid: review.request.uid, allowed: true},
    });
    res.writeHead(200, {'content-type': 'application/json',
                        'content-length': Buffer.byteLength(body)});
    res.end(body);
  });
});
server.listen(Number(args.port), '127.0.0.1', () => console.log('ready'));
