"""Stand-ins, on loopback, for what the server meets beyond the machine: IPTV upstreams of
MPEG-TS over HTTP, an HLS origin, and the nginx cache docs/deploy.md configures. Tests and
benchmarks share them (docs/architecture.md lists the modules); the product never imports them.
"""
