#!/bin/bash
# bench/plot_if_possible.sh OUT.png FILE.json...: bench/plot_bench.py with the first python that
# has matplotlib (Debian's python3-matplotlib, then the PyTorch venv of the GPU machines); where
# none has it, one line saying so and status 0, so a benchmark run never fails for want of a plot.
here=$(cd "$(dirname "$0")" && pwd)
for py in /usr/bin/python3 /opt/torch/.venv/bin/python python3; do
  if command -v "$py" > /dev/null && "$py" -c "import matplotlib" 2> /dev/null; then
    exec "$py" "$here/plot_bench.py" "$@"
  fi
done
echo "plot_if_possible: no python with matplotlib here, so no $1 (apt-get install python3-matplotlib)"
