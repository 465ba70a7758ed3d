#!/bin/bash
# log-analysis: 600 deterministic log lines from a small linear congruential generator.
set -eu
mkdir -p logs
awk 'BEGIN {
    split("/ /index.html /api/items /api/users /login /static/app.js /old-page /favicon.ico", paths, " ");
    split("200 200 200 200 200 301 404 404 500 502 503 200", codes, " ");
    seed = 31;
    for (i = 1; i <= 600; i++) {
        seed = (seed * 1109 + 12345) % 65536;
        p = paths[(int(seed / 8192) % 8) + 1];
        c = codes[(int(seed / 256) % 12) + 1];
        ip = (int(seed / 16) % 20) + 1;
        printf "10.0.0.%d - - [12/Mar/2024:%02d:%02d:%02d +0000] \"GET %s HTTP/1.1\" %s %d\n", ip, int(i / 60) % 24, i % 60, (i * 7) % 60, p, c, 100 + seed % 5000;
    }
}' > logs/access.log
