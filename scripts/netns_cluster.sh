#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# An emulated cluster on one machine: N hosts, each a network namespace with one interface (eth0, 10.77.X.i/24) on a
# switch (a bridge in a namespace of its own, where mpirun runs), every host's link shaped to the same bandwidth
# each way (tc tbf on both ends), and one MPI rank per host over Open MPI's TCP transport only: no shared memory
# between the ranks, exactly as across nodes. Everything it makes is removed when it ends, also on failure or
# Ctrl-C; no address exists outside its namespaces. Needs root, iproute2's ip and tc, and the kernel's veth,
# bridge and tbf.
#
#   scripts/netns_cluster.sh [--ranks N] [--gbps B] [--burst KB] [--np-per-host 1] -- PROGRAM ARGS...
#
#   --ranks N      hosts, one rank each (default 2)
#   --gbps B       each host's link to the switch, Gb/s each way (default 10; 0: not shaped)
#   --burst KB     tbf's bucket (default 256): the bytes a link sends at line rate before the rate applies
#   --cut-link R@T[+D]  fault injection: take rank R's link down T seconds after the start (both ends of it), and
#                  bring it up again D seconds later if +D is given
#   --keep         leave the namespaces (for inspection; remove them with --clean)
#   --clean        remove the namespaces of earlier runs that were kept or interrupted, and exit
#
# Example (the README's): two ranks of dtnn over a 1 Gb/s network
#   scripts/netns_cluster.sh --ranks 2 --gbps 1 -- build/bin/dtnn train --dataset synthetic --workers 1 ...
set -euo pipefail

me="netns_cluster.sh"
ranks=2
gbps=10
burst_kb=256
keep=0
clean=0
cut=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks="${2:-}"; shift 2 ;;
    --gbps) gbps="${2:-}"; shift 2 ;;
    --burst) burst_kb="${2:-}"; shift 2 ;;
    --cut-link) cut="${2:-}"; shift 2 ;;
    --keep) keep=1; shift ;;
    --clean) clean=1; shift ;;
    --) shift; break ;;
    *) echo "$me: unknown option '$1', expected --ranks N, --gbps B, --burst KB, --cut-link R@T[+D], --keep, --clean," \
            "then -- PROGRAM ..." >&2
       exit 2 ;;
  esac
done
if ! [[ "$ranks" =~ ^[0-9]+$ ]] || [ "$ranks" -lt 1 ] || [ "$ranks" -gt 250 ]; then
  echo "$me: --ranks '$ranks', expected a number from 1 to 250" >&2
  exit 2
fi
if ! [[ "$gbps" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
  echo "$me: --gbps '$gbps', expected a number of Gb/s (0: not shaped)" >&2
  exit 2
fi
if ! [[ "$burst_kb" =~ ^[0-9]+$ ]] || [ "$burst_kb" -lt 2 ]; then
  echo "$me: --burst '$burst_kb', expected a number of KB >= 2" >&2
  exit 2
fi
cut_rank=""
if [ -n "$cut" ]; then
  if ! [[ "$cut" =~ ^([0-9]+)@([0-9]+([.][0-9]+)?)(\+([0-9]+([.][0-9]+)?))?$ ]]; then
    echo "$me: --cut-link '$cut', expected RANK@SECONDS or RANK@SECONDS+SECONDS (e.g. 1@20 or 1@20+5)" >&2
    exit 2
  fi
  cut_rank="${BASH_REMATCH[1]}" cut_at="${BASH_REMATCH[2]}" cut_for="${BASH_REMATCH[5]}"
  if [ "$cut_rank" -ge "$ranks" ]; then
    echo "$me: --cut-link rank $cut_rank, expected a rank from 0 to $((ranks - 1))" >&2
    exit 2
  fi
fi
if [ "$(id -u)" != 0 ]; then
  echo "$me: needs root (network namespaces, veth links, tc), expected to run as root" >&2
  exit 2
fi
for tool in ip tc mpirun; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "$me: no '$tool' found, expected iproute2's ip and tc and Open MPI's mpirun" >&2
    exit 2
  fi
done

# Namespaces are named dtnn-cluster-<pid>-<host> and dtnn-cluster-<pid>-switch.
if [ "$clean" = 1 ]; then
  for ns in $(ip netns list | awk '/^dtnn-cluster-/ {print $1}'); do ip netns delete "$ns"; done
  exit 0
fi
[ $# -gt 0 ] || { echo "$me: no program to run, expected -- PROGRAM ARGS..." >&2; exit 2; }

prefix="dtnn-cluster-$$"
switch="$prefix-switch"
subnet=$((($$ % 200) + 20))  # 10.77.<subnet>.0/24: runs at the same time do not share an address
made=()
cutter=""
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  [ -z "$cutter" ] || kill "$cutter" 2>/dev/null || true
  if [ "$keep" = 0 ]; then
    for ns in "${made[@]}"; do ip netns delete "$ns" 2>/dev/null || true; done
  else
    echo "$me: kept ${made[*]} (--clean removes them)" >&2
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

shape() {  # namespace interface
  [ "$gbps" = 0 ] && return 0
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "${gbps}gbit" burst "${burst_kb}kb" latency 50ms || {
    echo "$me: tc could not shape $2 in $1 (tbf), expected the kernel's sch_tbf" >&2
    exit 2
  }
}

ip netns add "$switch"
made+=("$switch")
ip -n "$switch" link set lo up
ip -n "$switch" link add br0 type bridge
ip -n "$switch" addr add "10.77.$subnet.254/24" dev br0
ip -n "$switch" link set br0 up
hosts=()
for i in $(seq 1 "$ranks"); do
  ns="$prefix-$i"
  ip netns add "$ns"
  made+=("$ns")
  # The pair is made inside the namespaces: no interface ever exists in the root one.
  ip -n "$ns" link add eth0 type veth peer name "p$i" netns "$switch"
  ip -n "$ns" addr add "10.77.$subnet.$i/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$switch" link set "p$i" master br0
  ip -n "$switch" link set "p$i" up
  shape "$ns" eth0
  shape "$switch" "p$i"
  hosts+=("$ns")
done

# One rank per host, mpirun in the switch's namespace: its out-of-band channel and PMIx server reach the ranks over
# the bridge (PMIx listens on the root namespace's loopback otherwise, which a host cannot reach).
app=()
for ns in "${hosts[@]}"; do
  [ "${#app[@]}" = 0 ] || app+=(":")
  app+=(-np 1 ip netns exec "$ns" "$@")
done
echo "$me: $ranks hosts on 10.77.$subnet.0/24, links of ${gbps} Gb/s each way (tbf, burst ${burst_kb} KB; 0: not" \
     "shaped), one rank each over Open MPI's TCP transport (btl tcp,self on eth0)" >&2
if [ -n "$cut_rank" ]; then
  (
    host="$prefix-$((cut_rank + 1))"
    sleep "$cut_at"
    ip -n "$host" link set eth0 down && ip -n "$switch" link set "p$((cut_rank + 1))" down
    echo "$me: rank $cut_rank's link down after ${cut_at} s" >&2
    if [ -n "$cut_for" ]; then
      sleep "$cut_for"
      ip -n "$switch" link set "p$((cut_rank + 1))" up && ip -n "$host" link set eth0 up
      echo "$me: rank $cut_rank's link up again after ${cut_for} s down" >&2
    fi
  ) &
  cutter=$!
fi
set +e
ip netns exec "$switch" env PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=br0 \
  mpirun --allow-run-as-root --oversubscribe \
    --mca btl tcp,self --mca btl_tcp_if_include "10.77.$subnet.0/24" --mca oob_tcp_if_include "10.77.$subnet.0/24" \
    -x OMPI_MCA_btl=tcp,self "${app[@]}"
status=$?
set -e
exit "$status"
