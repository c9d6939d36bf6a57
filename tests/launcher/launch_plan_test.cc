// dtrain-run's command construction: hosts, hostfiles, single node, Slurm, forwarding, and bad input.
#include "launcher/launch_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "launcher/host_list.h"
#include "runtime/base/error.h"

namespace dtrain::launcher {
namespace {

using Argv = std::vector<std::string>;

std::string usage_error(const LaunchRequest& request, const LaunchEnvironment& environment) {
  try {
    plan_launch(request, environment);
  } catch (const runtime::UsageError& e) {
    return e.what();
  }
  return "no error";
}

LaunchRequest program(std::vector<std::string> argv) {
  LaunchRequest r;
  r.program = std::move(argv);
  return r;
}

TEST(HostList, ParsesHostsAndSlots) {
  const auto hosts = parse_host_list("node1:4,node-2.cluster:2,node3");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[1].host, "node-2.cluster");
  EXPECT_EQ(hosts[1].slots, 2);
  EXPECT_EQ(hosts[2].slots, 1);
  EXPECT_EQ(total_slots(hosts), 7);
}

TEST(HostList, RejectsMalformedEntriesNamingThem) {
  for (const char* bad : {"node1:0", "node1:x", "node1:4,", ",node1", "no;de:2", "node1:4:2", "-rf:2", "a b:1"}) {
    try {
      parse_host_list(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const runtime::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("-H"), std::string::npos) << e.what();
    }
  }
}

// Slot counts are summed without overflow: a:2147483647,b:1 made "mpirun -np -2147483648".
TEST(HostList, SlotCountsThatOverflowARankCountAreAUsageError) {
  EXPECT_EQ(total_slots(parse_host_list("a:2147483646,b:1")), 2147483647);
  try {
    total_slots(parse_host_list("a:2147483647,b:1"));
    FAIL() << "no error";
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the slot counts add up to 2147483648 by host 'b'"), std::string::npos)
        << e.what();
  }
}

TEST(HostList, HostfileWithCommentsSlotsAndLineNumbersInErrors) {
  const auto hosts =
      parse_hostfile("# cluster\nnode1 slots=4\n\nnode2 slots=4 max_slots=8  # two sockets\nnode3\n", "hf");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(total_slots(hosts), 9);
  try {
    parse_hostfile("node1 slots=4\nnode2 cores=4\n", "hosts.txt");
    FAIL();
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("hosts.txt:2: unknown field 'cores=4'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_hostfile("# nothing\n", "empty"), runtime::UsageError);
}

TEST(LaunchPlan, HostsGiveOneRankPerSlotGroupedByNode) {
  LaunchRequest r = program({"/bin/dtrain-train", "--config", "x.pbtxt"});
  r.np = 8;
  r.hosts = "node1:4,node2:4";
  LaunchEnvironment env;
  const LaunchPlan plan = plan_launch(r, env);
  EXPECT_EQ(plan.mode, "mpirun");
  EXPECT_EQ(plan.argv, (Argv{"mpirun", "-np", "8", "--map-by", "slot", "--bind-to", "none", "-H", "node1:4,node2:4",
                             "/bin/dtrain-train", "--config", "x.pbtxt"}));
}

TEST(LaunchPlan, ForwardsTheJobsVariablesAndRootOnlyWhenRoot) {
  LaunchRequest r = program({"/bin/true"});
  r.np = 2;
  LaunchEnvironment env;
  env.variables = {{"DTRAIN_LOG_LEVEL", "debug"}, {"NCCL_DEBUG", "INFO"},    {"CUDA_VISIBLE_DEVICES", "0,1"},
                   {"OMP_NUM_THREADS", "4"},      {"LD_LIBRARY_PATH", "/x"}, {"HOME", "/root"},
                   {"SECRET_TOKEN", "t"}};
  env.root = true;
  const Argv argv = plan_launch(r, env).argv;
  auto has = [&](const std::string& s) { return std::find(argv.begin(), argv.end(), s) != argv.end(); };
  for (const char* v :
       {"DTRAIN_LOG_LEVEL", "NCCL_DEBUG", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "LD_LIBRARY_PATH"}) {
    EXPECT_TRUE(has(v)) << v;
  }
  EXPECT_FALSE(has("HOME"));
  EXPECT_FALSE(has("SECRET_TOKEN"));
  EXPECT_TRUE(has("--allow-run-as-root"));
  env.root = false;
  const Argv as_user = plan_launch(r, env).argv;
  EXPECT_EQ(std::count(as_user.begin(), as_user.end(), "--allow-run-as-root"), 0);
}

TEST(LaunchPlan, SingleNodeUsesLocalhostWithNpSlotsAndPassesMpiArgs) {
  LaunchRequest r = program({"/bin/prog", "a b", "c;d"});
  r.np = 4;
  r.mpi_args = {"--mca", "btl", "tcp,self"};
  const LaunchPlan plan = plan_launch(r, {});
  EXPECT_EQ(plan.mode, "single-node");
  EXPECT_EQ(plan.argv, (Argv{"mpirun", "-np", "4", "--map-by", "slot", "--bind-to", "none", "-H", "localhost:4",
                             "--mca", "btl", "tcp,self", "/bin/prog", "a b", "c;d"}));
  EXPECT_EQ(display_command(plan.argv),
            "mpirun -np 4 --map-by slot --bind-to none -H localhost:4 --mca btl tcp,self /bin/prog 'a b' 'c;d'");
}

TEST(LaunchPlan, HostfileHostsGoToMpirunAsHostsAndBoundNp) {
  LaunchRequest r = program({"/bin/prog"});
  r.hostfile = "hosts.txt";
  r.hostfile_contents = "n1 slots=2\nn2\nn2\n";  // n2 once per slot, as Open MPI writes it
  const LaunchPlan plan = plan_launch(r, {});
  EXPECT_EQ(plan.argv[2], "4") << "-np defaults to all slots";
  const auto h = std::find(plan.argv.begin(), plan.argv.end(), "-H");
  ASSERT_NE(h, plan.argv.end());
  EXPECT_EQ(*(h + 1), "n1:2,n2:2");
  r.np = 5;
  EXPECT_NE(usage_error(r, {}).find("-np 5 is more than the 4 slots of hosts.txt"), std::string::npos);
}

// mpirun's placement options are passed on (--bind-to and --map-by replace the defaults, --npernode
// replaces --map-by and sets -np's default per host); under srun each is an error naming it.
TEST(LaunchPlan, MpirunPlacementOptionsArePassedOn) {
  LaunchRequest r = program({"/bin/prog"});
  r.hosts = "a:4,b:4";
  r.bind_to = "core";
  r.map_by = "node";
  r.oversubscribe = true;
  EXPECT_EQ(display_command(plan_launch(r, {}).argv),
            "mpirun -np 8 --map-by node --bind-to core --oversubscribe -H a:4,b:4 /bin/prog");
  r.map_by.clear();
  r.npernode = 2;
  EXPECT_EQ(display_command(plan_launch(r, {}).argv),
            "mpirun -np 4 --npernode 2 --bind-to core --oversubscribe -H a:4,b:4 /bin/prog");
  LaunchEnvironment slurm;
  slurm.variables = {{"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "4"}};
  slurm.srun_available = slurm.srun_supports_pmix = true;
  LaunchRequest in_job = program({"/bin/prog"});
  in_job.bind_to = "core";
  EXPECT_NE(usage_error(in_job, slurm).find("--bind-to is an mpirun option, and this run uses srun"),
            std::string::npos);
}

TEST(LaunchPlan, InsideSlurmUsesSrunWithPmixOrMpirunAndDefaultsNpToTheTasks) {
  LaunchRequest r = program({"/bin/prog", "--x"});
  LaunchEnvironment env;
  env.variables = {{"SLURM_JOB_ID", "42"}, {"SLURM_NTASKS", "8"}, {"DTRAIN_LOG_LEVEL", "info"}};
  env.srun_available = true;
  env.srun_supports_pmix = true;
  env.dtrain_run_path = "/opt/dtrain/bin/dtrain-run";
  LaunchPlan plan = plan_launch(r, env);
  EXPECT_EQ(plan.mode, "slurm-srun");
  EXPECT_EQ(plan.argv, (Argv{"srun", "--mpi=pmix", "--ntasks", "8", "--kill-on-bad-exit=1",
                             "/opt/dtrain/bin/dtrain-run", "--as-task", "--", "/bin/prog", "--x"}));
  env.srun_supports_pmix = false;
  plan = plan_launch(r, env);
  EXPECT_EQ(plan.mode, "slurm-mpirun");
  EXPECT_EQ(plan.argv[2], "8");
  EXPECT_EQ(std::count(plan.argv.begin(), plan.argv.end(), "-H"), 0) << "mpirun reads the allocation itself";
  r.np = 16;
  EXPECT_NE(usage_error(r, env).find("more than the allocation's 8 tasks"), std::string::npos);
  // Explicit hosts win over the allocation.
  r.np = 2;
  r.hosts = "a:1,b:1";
  EXPECT_EQ(plan_launch(r, env).mode, "mpirun");
}

TEST(LaunchPlan, ConflictsAndMissingPiecesAreUsageErrors) {
  LaunchRequest r = program({"/bin/prog"});
  r.hosts = "a:2";
  r.hostfile = "h";
  EXPECT_NE(usage_error(r, {}).find("-H and --hostfile both"), std::string::npos);
  EXPECT_NE(usage_error(program({"/bin/prog"}), {}).find("give -np"), std::string::npos);
  LaunchRequest none;
  none.np = 2;
  EXPECT_NE(usage_error(none, {}).find("no program"), std::string::npos);
  LaunchRequest too_many = program({"/bin/prog"});
  too_many.np = 3;
  too_many.hosts = "a:2";
  EXPECT_NE(usage_error(too_many, {}).find("-np 3 is more than the 2 slots of -H a:2"), std::string::npos);
}

// -x NAME[=value] as mpirun has it; the last one of a name wins, and it replaces the
// automatic forwarding of that name.
TEST(LaunchPlan, ExportedVariablesGoToMpirunAsDashX) {
  LaunchRequest r = program({"/bin/prog"});
  r.np = 1;
  r.exported = {"FOO=1", "HOME", "FOO=a,b c", "DTRAIN_LOG_LEVEL=debug", "NEVER_SET"};
  LaunchEnvironment env;
  env.variables = {{"HOME", "/root"}, {"DTRAIN_LOG_LEVEL", "info"}};
  const LaunchPlan plan = plan_launch(r, env);
  EXPECT_EQ(plan.argv, (Argv{"mpirun", "-np", "1", "--map-by", "slot", "--bind-to", "none", "-x", "FOO=a,b c", "-x",
                             "HOME", "-x", "DTRAIN_LOG_LEVEL=debug", "-H", "localhost:1", "/bin/prog"}));
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("-x NEVER_SET: NEVER_SET is not set"), std::string::npos) << plan.warnings[0];
  EXPECT_TRUE(plan.environment.empty());
}

// Under srun the values travel in srun's own environment (srun's --export list splits at ',').
TEST(LaunchPlan, ExportedVariablesUnderSrunGoThroughItsEnvironmentAndExportList) {
  LaunchRequest r = program({"/bin/prog"});
  r.exported = {"FOO=a,b c", "HOME", "NEVER_SET"};
  LaunchEnvironment env;
  env.variables = {{"SLURM_JOB_ID", "42"}, {"SLURM_NTASKS", "2"}, {"HOME", "/root"}};
  env.srun_available = true;
  env.srun_supports_pmix = true;
  env.dtrain_run_path = "/bin/dtrain-run";
  const LaunchPlan plan = plan_launch(r, env);
  EXPECT_EQ(plan.argv, (Argv{"srun", "--mpi=pmix", "--ntasks", "2", "--kill-on-bad-exit=1", "--export=ALL,FOO,HOME",
                             "/bin/dtrain-run", "--as-task", "--", "/bin/prog"}));
  EXPECT_EQ(plan.environment, (std::vector<std::pair<std::string, std::string>>{{"FOO", "a,b c"}}));
  EXPECT_EQ(plan.warnings.size(), 1u);
  EXPECT_EQ(display_plan(plan),
            "FOO='a,b c' srun --mpi=pmix --ntasks 2 --kill-on-bad-exit=1 --export=ALL,FOO,HOME /bin/dtrain-run "
            "--as-task -- /bin/prog");
}

TEST(LaunchPlan, ExportedVariableNamesAreChecked) {
  EXPECT_EQ(parse_exported_variable("A_1=x=y").value, "x=y");
  EXPECT_TRUE(parse_exported_variable("A=").has_value);
  EXPECT_FALSE(parse_exported_variable("_A").has_value);
  for (const char* bad : {"", "=1", "1A", "A-B", "A B=1", "A;rm=1"}) {
    try {
      parse_exported_variable(bad);
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const runtime::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("-x '") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(LaunchPlan, OutputFilenameIsMpirunsOptionOrOneSrunFilePerRank) {
  LaunchRequest r = program({"/bin/prog"});
  r.np = 2;
  r.output_dir = "logs";
  r.mpi_args = {"--oversubscribe"};
  EXPECT_EQ(plan_launch(r, {}).argv,
            (Argv{"mpirun", "-np", "2", "--map-by", "slot", "--bind-to", "none", "-H", "localhost:2",
                  "--output-filename", "logs", "--oversubscribe", "/bin/prog"}));
  r.mpi_args.clear();
  LaunchEnvironment env;
  env.variables = {{"SLURM_JOB_ID", "42"}};
  env.srun_available = true;
  env.srun_supports_pmix = true;
  env.dtrain_run_path = "/bin/dtrain-run";
  EXPECT_EQ(plan_launch(r, env).argv,
            (Argv{"srun", "--mpi=pmix", "--ntasks", "2", "--kill-on-bad-exit=1", "--output=logs/rank.%t.out",
                  "--error=logs/rank.%t.err", "/bin/dtrain-run", "--as-task", "--", "/bin/prog"}));
  r.output_dir = "logs%j";
  EXPECT_NE(usage_error(r, env).find("--output-filename logs%j: srun would read its '%'"), std::string::npos);
}

}  // namespace
}  // namespace dtrain::launcher
