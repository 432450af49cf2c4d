python3 -c "import ray" 2>/dev/null || bash bench/ray_gpu_wheels.sh --install 2>&1 | tail -1
bash .device/setup.sh >/dev/null 2>&1
export PYTHONPATH=. PYTHONUNBUFFERED=1
B="python3 bench/ray_scaling.py --gpu --model resnet50 --no-probe --uploads pageable"
F="grep -v INFO\|core_worker\|WARNING"
echo "== D b32 per-call 4, both paths" ; timeout 200 $B --batch 32 --rows 16384 --package /tmp/r32.clpkg 2>&1 | $F | tee $OUT/D.txt
echo "== E b32 per-call 4, data, 8 tasks per actor" ; timeout 120 $B --batch 32 --rows 16384 --package /tmp/r32.clpkg --path data --tasks-per-actor 8 2>&1 | $F | tee $OUT/E.txt
echo "== F b64 per-call 2, core" ; timeout 120 $B --batch 64 --per-call 2 --rows 16384 --package /tmp/r64.clpkg --path core 2>&1 | $F | tee $OUT/F.txt
