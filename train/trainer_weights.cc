// The Trainer's weights in and out: the checkpoint directory, saving, resuming, initial weights
// (--init-weights) and the fine-tuning learning-rate scales.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/mpi/collective_usage_check.h"
#include "runtime/mpi/mpi_check.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/torchvision_weights.h"
#include "train/config/resume_changes.h"
#include "train/trainer.h"
#include "train/trainer_parts.h"

namespace dtrain::train {

std::vector<NamedTensor> Trainer::checkpoint_tensors() {
  models::ParameterSet& params = parts_->engine->parameters();
  std::vector<float>& momentum = parts_->engine->momentum();
  return {{"params", params.params_flat(), static_cast<size_t>(params.flat_size())},
          {"momentum", momentum.data(), momentum.size()},
          {"bn_state", params.state_flat(), static_cast<size_t>(params.state_count())}};
}

void Trainer::prepare_checkpoint_dir() {
  const std::string& dir = config_.fields.checkpoint_dir();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  DTRAIN_USAGE_CHECK(!ec && std::filesystem::is_directory(dir) && ::access(dir.c_str(), W_OK | X_OK) == 0)
      << "checkpoint_dir " << dir << ": not a writable directory" << (ec ? ": " + ec.message() : std::string());
  for (const std::string& path : remove_stale_temporaries(dir)) {
    DTRAIN_LOG(kWarn) << "removed " << path << ", left behind by a checkpoint write that did not finish";
  }
}

bool Trainer::save_checkpoint(int epoch, long step_in_epoch, bool final_weights, bool must_write) {
  if (ctx_.topology().world_rank != 0) return true;
  parts_->engine->sync_to_host();
  // The GPU path reads its loss only now and then: a diverged model is caught here at the latest.
  for (const NamedTensor& t : checkpoint_tensors()) {
    const float* begin = t.data;
    const float* end = begin + t.count;
    const float* bad = std::find_if(begin, end, [](float v) { return !std::isfinite(v); });
    if (bad != end) {
      DTRAIN_FAIL() << "training diverged: " << t.name << "[" << bad - begin << "] is " << *bad << " at step "
                    << parts_->global_step << " (epoch " << epoch << "); no checkpoint written";
    }
  }
  const proto::CheckpointHeader header = checkpoint_header(epoch, step_in_epoch);
  // The final weights of a run without checkpoint_dir go to its run directory, in the same format.
  const std::string& dir = final_weights ? parts_->outputs.run_dir : config_.fields.checkpoint_dir();
  std::string path;
  try {
    path = write_checkpoint(dir, header, checkpoint_tensors(), final_weights ? 1 : config_.fields.keep_checkpoints());
  } catch (const runtime::Error& e) {
    if (must_write) throw;
    // A periodic checkpoint: the last good one stays, and the next interval tries again.
    const int failures = ++parts_->checkpoint_failures;
    const int allowed = config_.fields.max_checkpoint_failures();
    DTRAIN_CHECK(allowed == 0 || failures < allowed)
        << e.detail() << "; " << failures << " checkpoint(s) failed in a row (max_checkpoint_failures " << allowed
        << ")" << last_good_checkpoint_text();
    DTRAIN_LOG(kWarn) << "CHECKPOINT NOT WRITTEN at step " << parts_->global_step << ": " << e.detail() << "; "
                      << failures << " in a row" << last_good_checkpoint_text()
                      << "; training goes on and the next checkpoint tries again (free space in " << dir << ")";
    return false;
  }
  parts_->checkpoint_failures = 0;
  parts_->last_checkpoint = path;
  parts_->outputs.final_weights = path;
  DTRAIN_LOG(kInfo) << (final_weights ? "final weights " : "checkpoint ") << path << " (step " << parts_->global_step
                    << ")";
  return true;
}

std::string Trainer::last_good_checkpoint_text() const {
  const std::string& last = parts_->last_checkpoint;
  return last.empty() ? "; no checkpoint of this run yet" : "; the last good checkpoint is " + last;
}

proto::CheckpointHeader Trainer::checkpoint_header(int epoch, long step_in_epoch) {
  const long steps = steps_per_epoch();
  const bool epoch_done = step_in_epoch >= steps;
  proto::CheckpointHeader header;
  *header.mutable_config() = config_.fields;
  // Position of the next step: the start of the next epoch once this one is done.
  header.set_epoch(epoch_done ? epoch + 1 : epoch);
  header.set_step_in_epoch(epoch_done ? 0 : step_in_epoch);
  header.set_global_step(parts_->global_step);
  header.set_images_in_epoch(epoch_done ? 0 : images_before(epoch, step_in_epoch));
  header.set_data_seed(config_.fields.seed());
  header.set_world_size(ctx_.topology().world_size);
  header.set_run_id(parts_->run_id);
  header.set_num_classes(parts_->train_data->num_classes());
  header.set_in_channels(parts_->train_data->output_shape().channels);
  const EpochRun* run = parts_->current_run;
  if (!epoch_done && run != nullptr) {
    proto::EpochSums* sums = header.mutable_epoch_sums();
    const double seconds = run->timer.elapsed();
    sums->set_loss_sum(run->loss_sum + run->before.loss_sum());
    sums->set_losses_read(run->losses_read + run->before.losses_read());
    sums->set_steps(run->timer.steps() + run->before.steps());
    sums->set_seconds(seconds + run->before.seconds());
    sums->set_wait_seconds(run->timer.wait_fraction() * seconds + run->before.wait_seconds());
    sums->set_images(static_cast<double>(run->timer.steps() * global_batch()) + run->before.images());
  }
  return header;
}

// resume_from's position, broadcast from rank 0: epoch, step in epoch, global step, whether there
// is a checkpoint, images of the epoch trained on, and the checkpoint's world size and images per
// rank per step (batch_per_rank x accumulation_steps).
void Trainer::resume_from(const std::string& spec) {
  // Rank 0 reads and verifies the file; everyone gets its contents by broadcast, so the ranks need
  // no shared file system.
  int64_t position[7] = {0, 0, 0, 1, 0, 0, 0};
  const std::vector<NamedTensor> tensors = checkpoint_tensors();
  if (ctx_.topology().world_rank == 0) read_resume_checkpoint(spec, tensors, position);
  DTRAIN_MPI_CHECK(MPI_Bcast(position, 7, MPI_INT64_T, 0, ctx_.world()));
  if (position[3] == 0) return;
  proto::EpochSums& sums = parts_->resumed_sums;
  double carried[6] = {sums.loss_sum(),
                       static_cast<double>(sums.losses_read()),
                       static_cast<double>(sums.steps()),
                       sums.seconds(),
                       sums.wait_seconds(),
                       sums.images()};
  DTRAIN_MPI_CHECK(MPI_Bcast(carried, 6, MPI_DOUBLE, 0, ctx_.world()));
  sums.set_loss_sum(carried[0]);
  sums.set_losses_read(static_cast<int64_t>(carried[1]));
  sums.set_steps(static_cast<int64_t>(carried[2]));
  sums.set_seconds(carried[3]);
  sums.set_wait_seconds(carried[4]);
  sums.set_images(carried[5]);
  // Rank 0 read them into the engine's host mirror; the engine hands them to every rank.
  parts_->engine->load_from_host();
  parts_->start_epoch = static_cast<int>(position[0]);
  parts_->global_step = position[2];
  continue_epoch(position);
}

void Trainer::read_resume_checkpoint(const std::string& spec, const std::vector<NamedTensor>& tensors,
                                     int64_t position[7]) {
  if (spec == "latest" && list_checkpoints(config_.fields.checkpoint_dir()).empty()) {
    position[3] = 0;
    DTRAIN_LOG(kInfo) << "--resume latest: no checkpoint in " << config_.fields.checkpoint_dir()
                      << " yet, starting fresh (--resume required makes this an error)";
    return;
  }
  proto::CheckpointHeader header;
  // The config first: a changed model is named as such, before its tensors fail to fit.
  std::vector<std::string> accepted;
  const std::string path = resolve_checkpoint(spec, config_.fields.checkpoint_dir(), &header, tensors,
                                              [&](const proto::CheckpointHeader& h, const std::string& file) {
                                                DTRAIN_USAGE_CHECK(h.data_seed() == config_.fields.seed())
                                                    << "checkpoint " << file << " was written with seed "
                                                    << h.data_seed() << ", this run has " << config_.fields.seed();
                                                accepted = check_resume_config(h.config(), config_.fields, file);
                                              });
  for (const std::string& change : accepted) {
    DTRAIN_LOG(kWarn) << "resuming with " << change << " (accepted by resume_allow_changes)";
  }
  const int64_t saved_global_batch = int64_t{images_per_rank_per_step(header.config())} * header.world_size();
  position[0] = header.epoch();
  position[1] = header.step_in_epoch();
  position[2] = header.global_step();
  // Files before images_in_epoch: the steps of the epoch times their global batch.
  position[4] = header.images_in_epoch() > 0 ? header.images_in_epoch() : header.step_in_epoch() * saved_global_batch;
  position[5] = header.world_size();
  position[6] = images_per_rank_per_step(header.config());
  // Resumed from the newest checkpoint of its run, the run continues (its id, so rotation goes on
  // with its files). Resumed from an older one, it branches off under a new id, so its rotation
  // never deletes the original run's later checkpoints.
  bool newest = !header.run_id().empty();
  for (const CheckpointFile& f : list_checkpoints(config_.fields.checkpoint_dir())) {
    const bool later = f.written_unix_ns > header.written_unix_ns() ||
                       (f.written_unix_ns == header.written_unix_ns() && f.step > header.global_step());
    if (f.run_id == header.run_id() && later) newest = false;
  }
  if (newest) parts_->run_id = header.run_id();
  parts_->resumed_sums = header.epoch_sums();
  parts_->last_checkpoint = path;
  DTRAIN_LOG(kInfo) << "resuming " << (newest ? "run " : "as new run ") << parts_->run_id << " from " << path
                    << " at epoch " << position[0] << ", step " << position[1] << " of the epoch, step " << position[2]
                    << " in total";
}

void Trainer::continue_epoch(const int64_t position[7]) {
  // Progress in images: the epoch's first `seen` entries are done. Where they end on a step of this
  // run's global batch, the epoch goes on as the sampler deals it (the unchanged resume); otherwise
  // the rest of the epoch is dealt over this run's ranks from that entry.
  const int world = ctx_.topology().world_size;
  const long global_batch = this->global_batch();
  const long steps = steps_per_epoch();
  const long seen = position[4];
  long first_step = seen / global_batch;
  parts_->start_entry = 0;
  if (seen % global_batch != 0) {
    // The rest of the list, up to the epoch's cap where max_steps_per_epoch sets one, in whole steps.
    const long size = static_cast<long>(parts_->train_data->size());
    const long entries = config_.fields.max_steps_per_epoch() > 0 ? std::min(size, steps * global_batch) : size;
    const long remaining = std::min(steps, std::max(0L, entries - seen) / global_batch);
    first_step = steps - remaining;
    parts_->start_entry = static_cast<size_t>(seen);
  }
  if (first_step >= steps) {  // nothing of the epoch left at this geometry
    ++parts_->start_epoch;
    first_step = 0;
    parts_->start_entry = 0;
  }
  parts_->start_step_in_epoch = first_step;
  // "batch": images per rank per step, every micro-batch of gradient accumulation included.
  if (position[5] != world || position[6] != images_per_rank_per_step(config_.fields)) {
    const long saved_global_batch = position[5] * position[6];
    DTRAIN_LOG0(kInfo) << "resuming a checkpoint of " << position[5] << " rank(s) x batch " << position[6]
                       << " (global batch " << saved_global_batch << ") on " << world << " rank(s) x batch "
                       << images_per_rank_per_step(config_.fields) << " (global batch " << global_batch << "): peak lr "
                       << parts_->schedule->peak_lr() * static_cast<double>(saved_global_batch) /
                              static_cast<double>(global_batch)
                       << " -> " << parts_->schedule->peak_lr() << " by the linear rule; " << seen
                       << " images of epoch " << position[0] << " seen, the epoch goes on at its step " << first_step
                       << " of " << steps << (parts_->start_entry > 0 ? ", its rest dealt over the new ranks" : "")
                       << "; the schedule continues by images seen";
  }
}

void Trainer::init_from_weights() {
  Parts& p = *parts_;
  const std::string& path = config_.fields.init_weights();
  // The host mirror holds this run's own initialization (the GPU's copied down): with
  // reinit_classifier the classifier keeps it, and the file gives everything else.
  p.engine->sync_to_host();
  std::string summary;
  // Only rank 0 reads the file (the others need no copy of it); a bad file is one error on every rank.
  runtime::collective_usage_check(ctx_.world(), [&] {
    if (ctx_.topology().world_rank != 0) return;
    DTRAIN_USAGE_CHECK(std::ifstream(path).good()) << "init_weights " << path << ": cannot open it for reading";
    WeightImport options;
    options.reinit_classifier = config_.fields.reinit_classifier();
    summary = import_torchvision_weights(path, p.engine->parameters(), options);
  });
  p.engine->load_from_host();  // collective: rank 0's values on every rank, momentum still zero
  DTRAIN_LOG0(kInfo) << "init_weights: " << summary;
}

void Trainer::set_backbone_rate(int epoch) {
  Parts& p = *parts_;
  const bool frozen = epoch < config_.fields.freeze_backbone_epochs();
  const float scale = frozen ? 0.0f : config_.backbone_lr_scale;
  if (scale == p.backbone_lr_scale) return;
  p.engine->set_backbone_lr_scale(scale);
  if (frozen) {
    DTRAIN_LOG0(kInfo) << "epoch " << epoch << ": training the classifier only (freeze_backbone_epochs "
                       << config_.fields.freeze_backbone_epochs() << ")";
  } else {
    DTRAIN_LOG0(kInfo) << "epoch " << epoch << ": training every layer, the backbone at " << scale
                       << " x the learning rate";
  }
  p.backbone_lr_scale = scale;
}

}  // namespace dtrain::train
