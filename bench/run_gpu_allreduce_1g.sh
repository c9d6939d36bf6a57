SP=/opt/torch/.venv/lib/python3.12/site-packages
export LD_LIBRARY_PATH=$SP/nvidia/cudnn/lib:$SP/nvidia/nccl/lib:$SP/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
m() { timeout 100 mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE "$@" 2>&1 | grep -v INFO; }
for d in fp32 bf16; do for b in raw-nccl nccl raw-nccl nccl; do m build/bin/dtrain-bench-allreduce -b 256M -e 1G -f 2 -w 5 --iters 20 -d $d --backend $b --metrics-file $OUT/allreduce_1g_${b}_${d}_$RANDOM.json; done; done
# bf16 averaged in bf16: the nccl backend's native 16-bit sums against raw NCCL's ncclAvg on bf16.
for b in raw-nccl native raw-nccl native; do
  if [ $b = native ]; then args="--backend nccl --sixteen-bit-sum native"; else args="--backend raw-nccl"; fi
  m build/bin/dtrain-bench-allreduce -b 256M -e 1G -f 2 -w 5 --iters 20 -d bf16 --op avg $args --metrics-file $OUT/allreduce_1g_${b}_bf16_avg_$RANDOM.json
done
