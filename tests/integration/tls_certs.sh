#!/usr/bin/env bash
# tls_certs.sh DIR: the throwaway PKI of the TLS tests, made with openssl in
# DIR (which the caller removes): three CAs and certificates they sign, all
# EC P-256 and valid for a day.
#
#   caA, caB        two server CAs; srvA (signed by caA) and srvB (by caB)
#                   are for 127.0.0.1 and localhost; both.crt trusts both CAs
#   caC             the client CA of mutual TLS; cliC is a client
#                   certificate it signs, cliB one signed by caB instead
#
# Each NAME has NAME.crt and NAME.key (unencrypted PEM). (deploy/tls/README.md
# shows the same commands for a real deployment.)
set -euo pipefail
dir=${1:?usage: tls_certs.sh DIR}
cd "$dir"
ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -keyout "$1.key" -out "$1.crt" -subj "/CN=picket test $1" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    2>/dev/null
}
leaf() { # leaf NAME CA EXTENSIONS
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" \
    -out "$1.csr" -subj "/CN=picket test $1" 2>/dev/null
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 1 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
server_ext=$'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth'
ca caA
ca caB
ca caC
leaf srvA caA "$server_ext"
leaf srvB caB "$server_ext"
leaf cliC caC "extendedKeyUsage=clientAuth"
leaf cliB caB "extendedKeyUsage=clientAuth"
cat caA.crt caB.crt > both.crt
