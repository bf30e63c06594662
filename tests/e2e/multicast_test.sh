#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# A job whose results go to a multicast group: tally-dp sends one frame a
# round instead of one a member, the bridge delivers it to the members
# that joined, and four workers' 64 MiB f32 results stay exact and
# identical, with 1% loss each way (lost results come back unicast).
TESTBED_OPTS="-n 4 --loss-up 1 --loss-down 1"
. "$(dirname "$0")/preamble.sh"
TOKEN=00112233445566ff
GROUP=239.77.0.1

dp_start
ok $? "tally-dp starts"
job_add 1 "$TOKEN" 0 1 2 3 >/dev/null
ok $? "job added with results to group $GROUP"
dp_admin '{"cmd":"job_list"}' | grep -q "\"$GROUP\""
ok $? "job_list shows the group"
allreduce_all 1 "$TOKEN" 4 group --type f32 --size 64M --iters 1 \
	--seed 13 --timeout-ms 10000
completed=$(dp_counter completed)
results=$(dp_counter results)
served=$(dp_counter retransmissions_served)
echo "# completed $completed, results sent $results, served again $served"
[ "$results" -eq $((completed + served)) ]
ok $? "one result frame a round (plus unicast resends), not one a member"
expect=$(dp_admin '{"cmd":"job_add","id":2,"token":"0011223344556677","world":1,"members":[{"ip":"10.77.0.12","port":1}],"group":{"ip":"10.1.2.3","port":1}}' |
	/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["errno"])')
[ "$expect" = 22 ]
ok $? "a group that is not multicast is refused (errno $expect)"
finish
