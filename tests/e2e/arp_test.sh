#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# ARP spoofing: while two workers allreduce, a third host on the segment
# floods tally-dp with ARP requests that claim worker 1's address for its
# own MAC. tally-dp answers them but learns nothing from them: worker 1
# keeps getting its results (exact, bit-identical with worker 0's), the
# spoofer receives no tally frame, and the refused claims are counted in
# arp_refused.
TESTBED_OPTS="-n 3"
. "$(dirname "$0")/preamble.sh"
TOKEN=a4a4a4a4a4a4a4a4

dp_start
ok $? "tally-dp starts"
job_add 1 "$TOKEN" 0 1 >/dev/null
ok $? "a job of workers 0 and 1"

# The spoofer (worker namespace 3): ARP requests for tally-dp's address
# from worker 1's IP with its own MAC, every 2 ms, while it counts the
# tally frames that reach it. Stops when $WORK/stop appears.
ip netns exec "$TESTBED_NS_3" /usr/bin/python3 - "$TESTBED_DP_IP" \
	"$TESTBED_IP_2" "$WORK/stop" >"$WORK/spoof" 2>&1 <<'PY' &
import os, sys, time
from scapy.all import ARP, Ether, UDP, IP, AsyncSniffer, conf, get_if_hwaddr, sendp
dp_ip, victim, stop = sys.argv[1:4]
mac = get_if_hwaddr("eth0")
got = []
sn = AsyncSniffer(iface="eth0", store=False,
                  lfilter=lambda p: IP in p and UDP in p and p[IP].src == dp_ip,
                  prn=lambda p: got.append(p))
sn.start()
arp = Ether(dst="ff:ff:ff:ff:ff:ff", src=mac) / ARP(op=1, hwsrc=mac,
    psrc=victim, hwdst="00:00:00:00:00:00", pdst=dp_ip)
sock = conf.L2socket(iface="eth0")
sent = 0
while not os.path.exists(stop):
    sock.send(arp)
    sent += 1
    time.sleep(0.002)
time.sleep(0.5)
sn.stop()
print("spoof", sent, len(got))
PY
spid=$!
sleep 1
refused0=$(dp_counter arp_refused)
allreduce_all 1 "$TOKEN" 2 ar --type f32 --size 16M --iters 3 --seed 5 \
	--timeout-ms 10000
touch "$WORK/stop"
wait $spid
sed 's/^/# /' "$WORK/spoof"
read -r _ sent got < <(grep "^spoof" "$WORK/spoof")
[ "${sent:-0}" -gt 100 ] && [ "${got:-1}" -eq 0 ]
ok $? "the spoofer sent $sent ARP claims and received $got tally frames"
refused=$(( $(dp_counter arp_refused) - refused0 ))
echo "# arp_refused +$refused, arp_replies $(dp_counter arp_replies)"
[ "$refused" -gt 0 ]
ok $? "the claims are counted in arp_refused (+$refused)"
finish
