N=$(cat /tmp/hx/ns)
pidsof() { case $1 in pxp) pgrep -f "pxp-peers/pxeperf serve";; pxp2) pgrep -f "pxp-peers/pxeperf2 serve";; ng) pgrep -f "nginx: (worker|master)" | paste -sd,;; esac; }
portof() { case $1 in pxp) echo 8081;; pxp2) echo 8083;; ng) echo 8082;; esac; }
file=$1; n=$2; rounds=$3; mb=$4
for r in $(seq $rounds); do
 for s in pxp pxp2 ng; do
  perf stat -e task-clock -x, -o /tmp/hx/ps.$s -p $(pidsof $s) & SP=$!
  sleep 0.3
  t0=$(date +%s.%N)
  for i in $(seq $n); do ip netns exec ${N}c curl -s -o /dev/null http://10.77.0.1:$(portof $s)/$file & done
  for j in $(jobs -p); do [ $j != $SP ] && wait $j; done
  t1=$(date +%s.%N)
  kill -INT $SP; wait $SP
  ms=$(grep task-clock /tmp/hx/ps.$s | cut -d, -f1)
  echo "$r $s $(python3 -c "print(f'{$ms/1000/($n*$mb/1024):.3f} s/GiB  {$n*$mb*8*1.048576/1000/($t1-$t0):.2f} Gbit/s')")"
 done
done
