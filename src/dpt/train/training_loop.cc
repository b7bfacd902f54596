#include "dpt/train/training_loop.h"

#include <charconv>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "dpt/checkpoint/checkpoint_dir.h"
#include "dpt/checkpoint/checkpoint_summary.h"
#include "dpt/checkpoint/group_checkpoints.h"
#include "dpt/checkpoint/run_folder.h"
#include "dpt/core/config_error.h"
#include "dpt/core/trace.h"
#include "dpt/data/loader.h"
#include "dpt/optim/lr_schedule.h"
#include "dpt/optim/sgd.h"
#include "dpt/train/config.h"
#include "dpt/train/ledger_reads.h"
#include "dpt/train/timer.h"

namespace dpt::train {

namespace {

// The largest learning rate lr_scaling may make of `lr` (an lr typed as it is, however large,
// is taken: tests force divergence with one).
constexpr float kMaxScaledLr = 10.0f;

// Everything the loop must carry across an interruption.
struct LoopState {
  checkpoint::Position position;
  StepResult epoch_sum;
  double epoch_seconds = 0;  // of the current epoch, before this invocation
  std::vector<EpochStats> history;
};

// In a multi-process job, after every epoch: every rank's replica (parameters, buffers,
// optimizer state) must hold rank 0's bits. Equal gradients and equal updates keep them
// equal, so a difference is a bug (a gradient not summed, a rank skipping an update) or a
// host computing different bits; the job stops naming the ranks rather than report rank 0's
// figures for a model the other ranks no longer share. One i64 allreduce of N elements.
void check_replicas_agree(Trainable& model, int epoch) {
  checkpoint::Checkpoint state;
  model.save_state(state);
  const std::string text =
      checkpoint::digest(state.params) + checkpoint::digest(state.buffers) + checkpoint::digest(state.optimizer_state);
  uint64_t digest = 14695981039346656037ull;  // FNV-1a of the three digests
  for (const char c : text) digest = (digest ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  const std::vector<uint64_t> all = model.gather_digests(digest);
  std::ostringstream differing;
  for (size_t rank = 1; rank < all.size(); ++rank) {
    if (all[rank] != all[0]) differing << (differing.tellp() > 0 ? ", " : "") << rank;
  }
  if (differing.tellp() > 0) {
    throw std::runtime_error("after epoch " + std::to_string(epoch) + " the replicas of rank(s) " + differing.str() +
                             " hold different parameters, buffers or optimizer state from rank 0's (the " +
                             std::to_string(all.size()) +
                             " processes must stay bit for bit equal): a gradient was not summed alike or an "
                             "update was not applied on every rank");
  }
}

// "3x32x32 images in 10 classes (airplane, automobile, ...)": data as a resume message names it.
std::string data_str(const data::DataInfo& d) {
  std::string names;
  for (size_t i = 0; i < d.classes.size() && i < 3; ++i) names += (i ? ", " : "") + d.classes[i];
  if (d.classes.size() > 3) names += ", ...";
  return "data of " + d.shape.str() + " images in " + std::to_string(d.classes.size()) + " classes (" + names + ")";
}

bool same_data(const data::DataInfo& a, const data::DataInfo& b) {
  return a.shape == b.shape && a.classes == b.classes && a.light_on_dark == b.light_on_dark && a.mean == b.mean &&
         a.stddev == b.stddev;
}

// The settings a checkpoint records beside the fixed fields: the run's own and its learning rate.
std::vector<std::pair<std::string, std::string>> recorded_settings(const TrainOptions& settings, float lr) {
  std::vector<std::pair<std::string, std::string>> all{{"lr", setting_text(lr)}};
  all.insert(all.end(), settings.recorded_settings.begin(), settings.recorded_settings.end());
  return all;
}

void check_resumable(const checkpoint::Checkpoint& c, const std::string& source, const TrainOptions& settings,
                     const Trainable& model, int64_t train_examples, const data::DataInfo& data, float lr) {
  const auto mismatch = [&](const std::string& what, const std::string& saved, const std::string& now) {
    throw checkpoint::CheckpointError("cannot resume from " + source + ": it was written with " +
                                      (what.empty() ? "" : what + " ") + saved +
                                      ", this run has " + now + "; resume with the settings it was written with");
  };
  if (c.model != settings.model) mismatch("model", c.model, settings.model);
  if (!same_data(c.data, data)) {
    std::string detail = data_str(c.data) + ", this run has " + data_str(data);
    if (c.data.shape == data.shape && c.data.classes == data.classes) detail += " (their polarity or normalization differ)";
    else if (c.data.shape == data.shape) {
      detail += " (" + data::class_difference(c.data.classes, "the checkpoint", data.classes, "this run's data") + ")";
    }
    throw checkpoint::CheckpointError("cannot resume from " + source + ": it was written with " + detail +
                                      "; resume with the `data_dir` it was trained on");
  }
  if (c.batch_size != settings.batch_size)
    mismatch("`batch_size`", std::to_string(c.batch_size), std::to_string(settings.batch_size));
  if (c.seed != settings.seed) mismatch("`seed`", std::to_string(c.seed), std::to_string(settings.seed));
  if (c.deterministic_chunk != model.deterministic_chunk()) {
    const auto mode = [](int64_t chunk) {
      return chunk > 0 ? "`deterministic` with `chunk_size` " + std::to_string(chunk) : std::string("no `deterministic`");
    };
    mismatch("", mode(c.deterministic_chunk), mode(model.deterministic_chunk()));
  }
  if (c.lr_schedule != optim::schedule_name(settings.schedule.kind))
    mismatch("`lr_schedule`", c.lr_schedule, std::string(optim::schedule_name(settings.schedule.kind)));
  if (c.warmup_epochs != settings.schedule.warmup_epochs) {
    mismatch("`warmup_epochs`", std::to_string(c.warmup_epochs), std::to_string(settings.schedule.warmup_epochs));
  }
  if (c.lr_scaling != optim::lr_scaling_name(settings.lr_scaling))
    mismatch("`lr_scaling`", c.lr_scaling, std::string(optim::lr_scaling_name(settings.lr_scaling)));
  if (c.accumulate != settings.accumulate)
    mismatch("`accumulate`", std::to_string(c.accumulate), std::to_string(settings.accumulate));
  if (c.train_examples != train_examples) {
    mismatch("training examples (`train_limit`)", std::to_string(c.train_examples), std::to_string(train_examples));
  }
  // Checkpoints written before settings were recorded hold none, and are not compared.
  for (const auto& [name, now] : recorded_settings(settings, lr)) {
    for (const auto& [saved_name, saved] : c.settings) {
      if (saved_name == name && saved != now) mismatch("`" + name + "`", saved, now);
    }
  }
}

class Checkpointer {
 public:
  // A collective with per-host directories (who writes is agreed on).
  Checkpointer(const Trainable& model, const TrainOptions& settings, int64_t train_examples, data::DataInfo data,
               float lr)
      : model_(model),
        settings_(settings),
        run_(settings.run),
        train_examples_(train_examples),
        data_(std::move(data)),
        recorded_(recorded_settings(settings, lr)),
        dir_(enabled() ? checkpoint::expand_host(run_.checkpoint_dir) : std::filesystem::path()),
        writes_(enabled() && checkpoint::writes_checkpoints(model.process_group(), run_.checkpoint_dir)) {}

  // Before the first step (a collective): every writing process takes its folder's lock,
  // removes what killed writers left, and, for a fresh run, refuses a folder holding another
  // run's checkpoints (run_folder.h). A refusal on any process stops every process alike.
  void open() {
    if (!enabled()) return;
    std::string problem;
    // `resume` of a folder that does not exist: nothing to lock, and resume() says so.
    std::error_code ec;
    const bool absent = run_.resume && !run_.start_if_none && !std::filesystem::exists(dir_, ec);
    if (writes_ && !absent) {
      try {
        // A resumed run (dptrain launch restarts with resume_if_any) gives its predecessor
        // on this host a moment to exit; a fresh one is refused at once.
        lock_ = std::make_unique<checkpoint::FolderLock>(
            dir_, run_.resume ? std::chrono::milliseconds(2000) : std::chrono::milliseconds(0));
        const std::vector<std::string> removed = checkpoint::remove_orphaned_temporaries(dir_);
        if (!removed.empty() && run_.warn) {
          run_.warn("removed " + std::to_string(removed.size()) + " temporary file(s) that killed writers left in " +
                    dir_.string() + " (" + removed.front() + (removed.size() > 1 ? ", ..." : "") + ")");
        }
        if (!run_.resume && !run_.share_checkpoint_dir) checkpoint::refuse_foreign_checkpoints(dir_);
      } catch (const checkpoint::CheckpointError& e) {
        problem = e.what();
      }
    }
    for (const std::string& p : parallel::gather_strings(model_.process_group(), problem)) {
      if (!p.empty()) throw checkpoint::CheckpointError(p);
    }
  }
  // The run this process's checkpoints belong to: a new one's id (rank 0's, on every
  // process), or the resumed checkpoint's.
  void start_run() { run_id_ = parallel::broadcast_string(model_.process_group(), checkpoint::new_run_id(), 0); }
  void continue_run(const std::string& run_id) { run_id_ = run_id; }

  bool enabled() const { return !run_.checkpoint_dir.empty(); }
  // This process's directory ({host} expanded) and whether it writes there.
  const std::filesystem::path& dir() const { return dir_; }
  bool writes() const { return writes_; }
  bool due_after_step(int64_t global_step) const {
    return enabled() && run_.checkpoint_every > 0 && global_step % run_.checkpoint_every == 0;
  }

  // The new file's path; empty where another process (rank 0) writes the checkpoints.
  // Every process calls it: save_state may be a collective (a sharded optimizer gathers
  // its state).
  std::filesystem::path save(const LoopState& state) const {
    checkpoint::Checkpoint c;
    c.run_id = run_id_;
    c.settings = recorded_;
    c.model = settings_.model;
    c.seed = settings_.seed;
    c.batch_size = settings_.batch_size;
    c.train_examples = train_examples_;
    c.data = data_;
    c.deterministic_chunk = model_.deterministic_chunk();
    c.lr_schedule = optim::schedule_name(settings_.schedule.kind);
    c.warmup_epochs = settings_.schedule.warmup_epochs;
    c.lr_scaling = optim::lr_scaling_name(settings_.lr_scaling);
    c.accumulate = settings_.accumulate;
    c.devices = model_.device_names();
    c.position = state.position;
    c.epoch_sum = state.epoch_sum;
    c.epoch_seconds = state.epoch_seconds;
    c.history = state.history;
    model_.save_state(c);
    if (!writes_) return {};
    const trace::Span span(trace::Phase::checkpoint);
    return checkpoint::save(dir_, c, run_.keep_checkpoints);
  }

 private:
  const Trainable& model_;
  const TrainOptions& settings_;
  const RunOptions& run_;
  int64_t train_examples_;
  data::DataInfo data_;
  std::vector<std::pair<std::string, std::string>> recorded_;
  std::filesystem::path dir_;
  bool writes_;
  std::unique_ptr<checkpoint::FolderLock> lock_;  // writers only
  std::string run_id_;
};

// The state to continue from: the newest checkpoint any process holds, or the first step
// when there is none and the run allows that (start_if_none).
LoopState resume(Trainable& model, const TrainOptions& settings, Checkpointer& checkpointer,
                 int64_t train_examples, const data::DataInfo& data, float lr) {
  const RunOptions& run = settings.run;
  std::vector<std::string> refused;
  const std::optional<checkpoint::Loaded> found = checkpoint::load_latest_in_group(
      model.process_group(), checkpointer.dir(), checkpointer.writes(), /*none_is_ok=*/run.start_if_none,
      run.resume_run.empty() ? std::nullopt : std::optional<std::string>(run.resume_run), &refused);
  if (!found) {
    // start_if_none: say what was there and why none of it could be used.
    if (run.warn && !refused.empty()) {
      std::string message = "no usable checkpoint in " + checkpointer.dir().string() + "; starting from the first step";
      for (const std::string& why : refused) message += "\n  skipped: " + why;
      run.warn(message);
    }
    checkpointer.start_run();
    return {};
  }
  const checkpoint::Loaded& loaded = *found;
  for (const std::string& why : loaded.refused) {
    if (run.warn) run.warn("skipping a damaged checkpoint: " + why);
  }
  const std::string source = loaded.file.string();
  const checkpoint::Checkpoint& c = loaded.checkpoint;
  check_resumable(c, source, settings, model, train_examples, data, lr);
  model.load_state(c, source);
  checkpointer.continue_run(c.run_id);
  if (run.on_resume) run.on_resume({loaded.file, c.position, c.devices, c.history});
  return {c.position, c.epoch_sum, c.epoch_seconds, c.history};
}

// `saved`: the checkpoint written on stopping, empty if none was written here; `dir`: the
// checkpoint directory, empty without --checkpoint-dir.
std::string interrupted_message(int signal, const checkpoint::Position& at, const std::filesystem::path& saved,
                                const std::string& dir) {
  const char* name = signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a stop request";
  std::string message = std::string("stopped by ") + name + " after step " + std::to_string(at.global_step) +
                        " (epoch " + std::to_string(at.epoch + 1) + ", batch " + std::to_string(at.batch_offset) + ")";
  if (dir.empty()) return message + "; no `checkpoint_dir` was given, so nothing was saved";
  if (saved.empty()) return message + "; rank 0 wrote the checkpoint to " + dir + ", rerun with `resume` to continue";
  return message + "; checkpoint written to " + saved.string() + ", rerun with `resume` to continue";
}

// A batch larger than the data, or a learning rate the scaling rule made absurd, is a
// mistake to name before any work: 2e9 examples per batch at lr_scaling linear made an lr of
// 1.6e6 that diverged at once.
void check_batch_and_lr(const TrainOptions& settings, float lr, int64_t train_examples) {
  if (settings.batch_size > train_examples) {
    throw ConfigError("batch_size", "`batch_size` " + std::to_string(settings.batch_size) + " is larger than the " +
                                        std::to_string(train_examples) +
                                        " training examples; pass at most that (a batch of all of them is one step "
                                        "per epoch)");
  }
  const int64_t examples = settings.batch_size * settings.accumulate;
  const float scaled = optim::scaled_lr(lr, settings.lr_scaling, examples);
  if (settings.lr_scaling != optim::LrScaling::none && !(scaled <= kMaxScaledLr)) {
    char text[96];
    std::snprintf(text, sizeof text, "%g into %g", static_cast<double>(lr), static_cast<double>(scaled));
    throw ConfigError("lr_scaling", "`lr_scaling` " + std::string(optim::lr_scaling_name(settings.lr_scaling)) +
                                        " turns `lr` " + text + " for " + std::to_string(examples) +
                                        " examples per update, above " + std::to_string(static_cast<int>(kMaxScaledLr)) +
                                        ", where no optimizer here trains; lower `lr`, `batch_size` or `accumulate`, "
                                        "or pass `lr_scaling` none");
  }
}

bool next_batch(data::BatchLoader& loader, data::Batch& batch) {
  const trace::Span span(trace::Phase::data);
  return loader.next(batch);
}

}  // namespace

std::string setting_text(float value) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  return std::string(text, ec == std::errc() ? end : text);
}

LoopResult run_training(Trainable& model, const data::Dataset& train_data, const data::Dataset& test_data,
                        const TrainOptions& settings, float lr, const EpochCallback& on_epoch,
                        const StepCallback& on_step) {
  validate(settings);
  optim::check_learning_rate(lr);
  const RunOptions& run = settings.run;
  const data::DataInfo data_info = train_data.info();
  check_batch_and_lr(settings, lr, train_data.size());
  Checkpointer checkpointer(model, settings, train_data.size(), data_info, lr);
  checkpointer.open();
  LoopState state;
  if (run.resume) state = resume(model, settings, checkpointer, train_data.size(), data_info, lr);
  else checkpointer.start_run();
  data::BatchLoader loader(train_data, settings.batch_size, /*shuffle=*/true, settings.seed, /*augment=*/true);
  // Filling a batch (decoding pictures, augmenting) runs between steps, on every core.
  loader.set_threads(static_cast<int>(std::thread::hardware_concurrency()));
  if (const auto [index, count] = model.data_shard(); count > 1) loader.set_shard(index, count, std::max<int64_t>(model.deterministic_chunk(), 1));
  loader.set_prefetch(run.prefetch);  // the step's `data` span is then the wait for it
  LoopResult result;
  const auto stop_requested = [&] { return model.agree_on_stop(run.stop_signal ? run.stop_signal() : 0); };

  // The schedule counts updates: ceil(batches / accumulate) per epoch, each on up to
  // batch_size * accumulate examples (what the linear scaling rule scales by).
  const int64_t accumulate = settings.accumulate;
  const int64_t steps_per_epoch = (loader.num_batches() + accumulate - 1) / accumulate;
  const float base_lr = optim::scaled_lr(lr, settings.lr_scaling, settings.batch_size * accumulate);

  // The figures and the divergence record wait on the devices until a read (ledger_reads.h).
  LedgerReads reads(model.ledger_reads_are_free(), run.on_nan);
  // Reads the ledgers, adding the figures to `into`; the divergence message of the first
  // non-finite update since the last read, if there was one.
  const auto read_ledger = [&](StepResult& into) -> std::optional<std::string> {
    const parallel::StepLedger ledger = model.read_ledger();
    into += ledger.figures;
    std::optional<std::string> message;
    if (ledger.non_finite) {
      std::vector<std::string> names;
      for (const auto& [name, grad] : model.named_gradients()) names.push_back(name);
      const auto [epoch, step] = reads.where(ledger.non_finite->tag);
      const float update_lr =
          optim::learning_rate(settings.schedule, ledger.non_finite->tag - 1, steps_per_epoch, settings.epochs, base_lr);
      message = divergence_message(describe_non_finite(*ledger.non_finite, names), epoch, step, update_lr, lr);
    }
    reads.read_done();
    return message;
  };
  // Before a checkpoint and at an epoch's end: every update read, the figures complete.
  const auto read_unread = [&] {
    if (!reads.any_unread()) return;
    StepResult late;
    if (const auto message = read_ledger(late)) throw DivergenceError(*message);
    state.epoch_sum += late;
    result.examples_trained += late.examples;
  };

  for (int64_t epoch = state.position.epoch; epoch < settings.epochs; ++epoch) {
    model.set_training(true);
    loader.seek(epoch, state.position.batch_offset);
    Timer timer;
    timer.start();
    const parallel::WireBytes wire_at_start = model.wire_bytes();
    data::Batch batch;
    while (true) {
      // One update: `accumulate` micro-batches (fewer at the end of the epoch), the
      // gradients of all but the last kept unreduced and the last's added to them.
      trace::Span iteration(trace::Phase::iteration, state.position.global_step + 1);
      StepResult step;
      int64_t micro = 0;
      while (micro < accumulate && next_batch(loader, batch)) {
        ++micro;
        const bool last = micro == accumulate || loader.batch_offset() == loader.num_batches();
        const trace::Span span(trace::Phase::step);
        model.compute_batch_gradients(batch, last ? parallel::GradientSync::now : parallel::GradientSync::later);
        if (reads.after_each_micro_batch()) step += model.read_ledger().figures;
      }
      if (micro == 0) {
        iteration.discard();
        break;
      }
      model.set_learning_rate(
          optim::learning_rate(settings.schedule, state.position.global_step, steps_per_epoch, settings.epochs, base_lr));
      state.position.batch_offset = loader.batch_offset();
      ++state.position.global_step;
      std::optional<std::string> diverged;
      {
        const trace::Span span(trace::Phase::guard);
        model.check_finite(state.position.global_step);
        reads.checked(state.position.global_step, epoch + 1, loader.batch_offset());
        if (reads.due(state.epoch_sum.examples > 0)) diverged = read_ledger(step);
      }
      if (diverged) {
        if (run.on_nan == OnNan::stop) throw DivergenceError(*diverged);
        ++result.skipped_steps;  // on_nan skip reads every update: this one diverged
        if (run.warn) run.warn(*diverged + " (`on_nan` skip: update dropped)");
      } else {
        model.apply_update();
        state.epoch_sum += step;
        result.examples_trained += step.examples;
      }
      if (on_step) {
        on_step(static_cast<int>(epoch + 1), loader.batch_offset(), loader.num_batches(), state.epoch_sum.mean_loss(),
                state.epoch_sum.accuracy());
      }
      const int signal = stop_requested();
      if (checkpointer.due_after_step(state.position.global_step) || (signal != 0 && checkpointer.enabled())) {
        read_unread();
        LoopState snapshot = state;
        snapshot.epoch_seconds += timer.elapsed();
        const std::filesystem::path saved = checkpointer.save(snapshot);
        if (signal != 0)
          throw TrainingInterrupted(interrupted_message(signal, state.position, saved, run.checkpoint_dir), signal);
      }
      if (signal != 0)
        throw TrainingInterrupted(interrupted_message(signal, state.position, {}, run.checkpoint_dir), signal);
    }
    read_unread();
    const double seconds = timer.stop();
    result.train_seconds += seconds;
    EpochStats stats = epoch_stats(static_cast<int>(epoch + 1), state.epoch_sum, state.epoch_seconds + seconds);
    const parallel::WireBytes wire = model.wire_bytes();
    stats.bytes_within_process = static_cast<int64_t>(wire.within_process - wire_at_start.within_process);
    stats.bytes_between_processes = static_cast<int64_t>(wire.between_processes - wire_at_start.between_processes);
    model.set_training(false);
    Timer eval_timer;
    {
      const trace::Span span(trace::Phase::evaluate);
      stats.test_acc = model.evaluate(test_data, settings.batch_size);
    }
    stats.eval_seconds = eval_timer.stop();
    if (run.check_replicas && model.data_shard().second > 1) check_replicas_agree(model, static_cast<int>(epoch + 1));
    state.history.push_back(stats);
    state.position = {epoch + 1, 0, state.position.global_step};
    state.epoch_sum = {};
    state.epoch_seconds = 0;
    if (on_epoch) on_epoch(stats);
    std::filesystem::path saved;
    if (checkpointer.enabled()) saved = checkpointer.save(state);
    if (const int signal = stop_requested(); signal != 0 && epoch + 1 < settings.epochs) {
      throw TrainingInterrupted(interrupted_message(signal, state.position, saved, run.checkpoint_dir), signal);
    }
  }
  model.set_training(true);
  result.history = state.history;
  return result;
}

}  // namespace dpt::train
