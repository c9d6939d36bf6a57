# Shared names for the simulator's scripts (sourced, not run). One place says where the state
# lives and what each node's namespaces are called, so up, down, rsh-agent and run agree.
sim_state_dir=${DTRAIN_SIM_STATE:-/run/dtrain-sim}
sim_bridge=dtrain-sim-br
sim_subnet_prefix=10.77.0          # node i has 10.77.0.i; the host side of the bridge has .254
sim_host_address=${sim_subnet_prefix}.254

sim_netns() { echo "dtrain-sim-$1"; }              # network namespace of node $1 (node1, node2, ...)
sim_uts_file() { echo "$sim_state_dir/uts/$1"; }    # its hostname namespace, bind-mounted here
sim_veth() { echo "dtsim-$1"; }                     # host end of its link (interface names <= 15 chars)

sim_die() { echo "cluster/sim: $*" >&2; exit 1; }

sim_require_root() {
  [[ $(id -u) -eq 0 ]] || sim_die "needs root (network namespaces, bridge, tc); run it as root"
  command -v ip >/dev/null || sim_die "the 'ip' command (Debian package iproute2) is not installed"
}
