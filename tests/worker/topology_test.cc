#include "worker/topology.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace memcoord {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(Topology, NothingSetIsASingleProcess) {
  auto t = DiscoverTopology(Env({}));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->rank, 0);
  EXPECT_EQ(t->world_size, 1);
  EXPECT_EQ(t->source, "default");
}

TEST(Topology, OpenMpi) {
  auto t = DiscoverTopology(Env(
      {{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "8"}}));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->rank, 5);
  EXPECT_EQ(t->local_rank, 1);
  EXPECT_EQ(t->world_size, 8);
  EXPECT_EQ(t->source, "openmpi");
}

TEST(Topology, SlurmAndPmix) {
  auto slurm = DiscoverTopology(Env({{"SLURM_PROCID", "3"}, {"SLURM_LOCALID", "3"}, {"SLURM_NTASKS", "4"}}));
  ASSERT_TRUE(slurm.ok());
  EXPECT_EQ(slurm->source, "slurm");
  EXPECT_EQ(slurm->rank, 3);
  auto pmix = DiscoverTopology(Env({{"PMIX_RANK", "2"}, {"MPI_LOCALRANKID", "0"}, {"PMIX_SIZE", "4"}}));
  ASSERT_TRUE(pmix.ok());
  EXPECT_EQ(pmix->source, "pmix");
  EXPECT_EQ(pmix->rank, 2);
  EXPECT_EQ(pmix->world_size, 4);
}

TEST(Topology, ExplicitMemcoordVariablesWin) {
  auto t = DiscoverTopology(Env({{"MEMCOORD_RANK", "1"},
                                 {"MEMCOORD_WORLD_SIZE", "2"},
                                 {"OMPI_COMM_WORLD_RANK", "7"},
                                 {"OMPI_COMM_WORLD_SIZE", "8"}}));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->rank, 1);
  EXPECT_EQ(t->source, "memcoord");
}

TEST(Topology, MalformedValuesAreRefusedWithTheVariableName) {
  auto bad = DiscoverTopology(Env({{"SLURM_PROCID", "x1"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("SLURM_PROCID"), std::string::npos);
  auto outside = DiscoverTopology(Env({{"MEMCOORD_RANK", "4"}, {"MEMCOORD_WORLD_SIZE", "4"}}));
  EXPECT_EQ(outside.status().code(), StatusCode::kInvalidArgument);
}

TEST(Topology, DeviceFromLocalRank) {
  EXPECT_EQ(DeviceForLocalRank(0, 8), 0);
  EXPECT_EQ(DeviceForLocalRank(9, 8), 1);
  EXPECT_EQ(DeviceForLocalRank(3, 0), -1);
}

}  // namespace
}  // namespace memcoord
