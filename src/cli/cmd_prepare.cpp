// greentrain prepare: text files (larger than memory if need be) -> llm.c token shards, on all
// cores, with a progress line (train/shards.h does the work).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdio>

#include "cli/command.h"
#include "core/error.h"
#include "train/data.h"
#include "train/shards.h"

// the command's own names, apart from the other command files' in a unity batch
namespace gt_cmd_prepare {
namespace {

// SentencePiece holds its whole training text (and several times it while training) in memory:
// 64 GiB is past what it can train on, and 1e300 MiB overflowed the byte count
constexpr double kMaxTrainMib = 65536;

struct Args {
  std::vector<std::string> inputs;
  std::string tokenizer = "gpt2", tokenizer_path, tokenizer_model, out;
  int vocab_size = 8192;
  double val_fraction = 0.1;
  int64_t shard_tokens = 100'000'000;
  int threads = 0;
  double train_mib = 100;
  bool overwrite = false;
  bool vocab_size_given = false, train_mib_given = false;  // on the command line
};

std::string duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  int t = static_cast<int>(s + 0.5);
  return t >= 3600 ? fmt::format("{}h{:02d}m", t / 3600, t / 60 % 60)
                   : fmt::format("{}m{:02d}s", t / 60, t % 60);
}

// check_args' checks of the tokenizer's options; throws gt::Error.
void check_values(const Args& a) {
  if (a.tokenizer == "char")
    throw gt::Error(
        "--tokenizer char: a character vocabulary needs the whole text first; expected byte, bpe "
        "or gpt2");
  if (a.tokenizer != "byte" && a.tokenizer != "bpe" && a.tokenizer != "gpt2")
    throw gt::Error(fmt::format("--tokenizer {}: expected byte, bpe or gpt2", a.tokenizer));
  // a value outside its range is refused whatever the tokenizer
  if (!(a.train_mib > 0 && a.train_mib <= kMaxTrainMib))
    throw gt::Error(fmt::format("--train-mib {}: expected (0, {}] MiB", a.train_mib, kMaxTrainMib));
  auto unused = [&](bool given, const std::string& option, const char* use) {
    if (given)
      throw gt::UsageError(fmt::format("{}: {}; this prepare has --tokenizer {}{}", option, use,
                                       a.tokenizer,
                                       a.tokenizer_model.empty() ? "" : " --tokenizer-model"));
  };
  const bool trains = a.tokenizer == "bpe" && a.tokenizer_model.empty();
  unused(!a.tokenizer_path.empty() && a.tokenizer != "gpt2", "--tokenizer-path " + a.tokenizer_path,
         "GPT-2's vocabulary, for --tokenizer gpt2");
  unused(!a.tokenizer_model.empty() && a.tokenizer != "bpe",
         "--tokenizer-model " + a.tokenizer_model, "a SentencePiece model, for --tokenizer bpe");
  unused(a.vocab_size_given && !trains, fmt::format("--vocab-size {}", a.vocab_size),
         "the size of the vocabulary --tokenizer bpe trains (byte has 256 ids, gpt2 and a "
         "--tokenizer-model their own)");
  unused(a.train_mib_given && !trains, fmt::format("--train-mib {}", a.train_mib),
         "the text --tokenizer bpe trains its vocabulary on");
  if (a.tokenizer == "gpt2" && a.tokenizer_path.empty())
    throw gt::Error(
        "--tokenizer gpt2 (the default) needs --tokenizer-path: a folder with GPT-2's vocab.json "
        "and merges.txt (a Hugging Face GPT-2 checkpoint folder has them); or --tokenizer byte "
        "or bpe");
  if (trains && (a.vocab_size < 260 || a.vocab_size > 65536))
    throw gt::Error(
        fmt::format("--vocab-size {}: expected 260 to 65536 (an unknown id and the 256 bytes "
                    "come first; llm.c shards hold uint16 token ids)",
                    a.vocab_size));
}

// The options in their own names (TrainConfig::validate() names the configuration's keys). Every
// refusal here is a usage error (exit 2): a tokenizer that is not one, a value outside its
// range, an option that the chosen tokenizer has no use for or one without the option it needs.
void check_args(const Args& a) {
  gt::cli::as_usage([&] { check_values(a); });
  gt::PrepareOptions opt;  // --val-fraction, --shard-tokens, --threads
  opt.val_fraction = a.val_fraction;
  opt.shard_tokens = a.shard_tokens;
  opt.threads = a.threads;
  gt::cli::as_usage([&] { gt::check_prepare_options(opt); });
}

// The tokenizer the options name, built as a configuration's (Tokenizer::from_config) with
// messages naming prepare's options (--tokenizer-model PATH, --vocab-size 300); bpe without a
// model trains on the first --train-mib MiB of the inputs. Throws gt::Error.
gt::Tokenizer make_tokenizer(const Args& a) {
  gt::TrainConfig cfg;
  cfg.tokenizer = a.tokenizer;
  cfg.tokenizer_path = a.tokenizer_path;
  cfg.tokenizer_model = a.tokenizer_model;
  cfg.bpe_vocab_size = a.vocab_size;
  const std::string inputs = fmt::format("{}", fmt::join(a.inputs, ", "));
  std::string sample;
  if (a.tokenizer == "bpe" && a.tokenizer_model.empty()) {
    sample = gt::read_prefix(a.inputs, static_cast<size_t>(a.train_mib * (1 << 20)));
    if (sample.find_first_not_of('\n') == std::string::npos)
      throw gt::Error(
          fmt::format("{}: no text to train a BPE vocabulary on ({}); expected UTF-8 text", inputs,
                      sample.empty() ? "empty" : "only empty lines"));
    std::fprintf(stderr, "prepare: training a BPE vocabulary of %d on the first %.1f MiB\n",
                 a.vocab_size, sample.size() / double(1 << 20));
  }
  return gt::Tokenizer::from_config(cfg, sample, inputs, "--");
}

int run_prepare(const Args& a) {
  check_args(a);
  gt::PrepareOptions opt;
  opt.val_fraction = a.val_fraction;
  opt.shard_tokens = a.shard_tokens;
  opt.threads = a.threads;
  opt.overwrite = a.overwrite;
  // before any slow work: the options, then the folder
  gt::check_prepare_options(opt);
  gt::check_prepare_output(a.out, a.overwrite);
  const gt::Tokenizer tok = make_tokenizer(a);
  const bool tty = isatty(fileno(stderr));
  int last_decile = -1;
  auto show = [&](const gt::PrepareProgress& p) {
    const double frac = p.bytes_total ? double(p.bytes_done) / p.bytes_total : 1;
    const int64_t tokens = p.train_tokens + p.val_tokens;
    const double tps = p.seconds > 0 ? tokens / p.seconds : 0;
    const double eta = frac > 0 ? p.seconds * (1 - frac) / frac : -1;
    const int width = 30, filled = static_cast<int>(frac * width);
    std::string line =
        fmt::format("[{}{}] {:5.1f}% {:.1f}/{:.1f} MiB | {} tokens | {:.0f} tokens/s | ETA {}",
                    std::string(filled, '#'), std::string(width - filled, '.'), 100 * frac,
                    p.bytes_done / double(1 << 20), p.bytes_total / double(1 << 20), tokens, tps,
                    duration(eta));
    if (tty) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
    } else if (static_cast<int>(frac * 10) > last_decile) {
      last_decile = static_cast<int>(frac * 10);
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  };
  auto r = gt::prepare_shards(a.inputs, tok, a.out, opt, show);
  if (tty) std::fprintf(stderr, "\n");
  std::printf(
      "prepare: %lld train + %lld validation tokens (%s tokenizer, %d ids) in %zu shards "
      "in %s, %.1f s (%.0f tokens/s)\n",
      (long long)r.train_tokens, (long long)r.val_tokens, tok.kind.c_str(), tok.vocab_size(),
      r.shards.size(), a.out.c_str(), r.seconds,
      r.seconds > 0 ? (r.train_tokens + r.val_tokens) / r.seconds : 0.0);
  std::string tok_keys =
      tok.kind == "gpt2"
          ? fmt::format(" --set data.tokenizer=gpt2 --set data.tokenizer_path={}", a.out)
      : tok.kind == "bpe"
          ? fmt::format(" --set data.tokenizer=bpe --set data.tokenizer_model={}/tokenizer.model",
                        a.out)
          : std::string(" --set data.tokenizer=byte");  // so that its ids decode to text
  std::printf(
      "train on them with: greentrain train CONFIG --set data.format=llmc --set "
      "'data.path=%s/train_*.bin'%s --set model.vocab_size=%d%s\n",
      a.out.c_str(),
      r.val_tokens > 0 ? fmt::format(" --set 'data.val_path={}/val_*.bin'", a.out).c_str() : "",
      tok.vocab_size(), tok_keys.c_str());
  return 0;
}

void setup(CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "prepare", "Tokenize text files into llm.c token shards (train_*.bin, val_*.bin)");
  sub->add_option("text", args->inputs, "UTF-8 text files, read in order")->required();
  sub->add_option("--tokenizer", args->tokenizer, "byte, bpe or gpt2")->capture_default_str();
  sub->add_option("--tokenizer-path", args->tokenizer_path,
                  "gpt2: folder with vocab.json and merges.txt");
  sub->add_option("--tokenizer-model", args->tokenizer_model,
                  "bpe: a SentencePiece .model to use (default: train one)");
  auto* vocab_size =
      sub->add_option("--vocab-size", args->vocab_size,
                      "bpe without --tokenizer-model: vocabulary to train, 260 to 65536 and at "
                      "least what the text needs (the unknown id, 256 bytes and the characters "
                      "of 99.95% of the text: an error names it)")
          ->check(gt::cli::int_range(260, 65536))
          ->capture_default_str();
  auto* train_mib =
      sub->add_option("--train-mib", args->train_mib,
                      "bpe without --tokenizer-model: MiB of the inputs' beginning to train the "
                      "vocabulary on, in (0, 65536]")
          ->capture_default_str();
  sub->add_option("--out", args->out, "Folder for the shards and the tokenizer")->required();
  sub->add_flag("--overwrite", args->overwrite,
                "--out may hold an earlier prepare's output: its shards are replaced (without "
                "it a folder that is not empty is refused)");
  sub->add_option("--val-fraction", args->val_fraction,
                  "Last fraction of the text that goes to val_*.bin")
      ->capture_default_str();
  sub->add_option("--shard-tokens", args->shard_tokens, "Tokens per shard, 1 to 2147483647")
      ->check(gt::cli::int_range(1, std::numeric_limits<int>::max()))
      ->capture_default_str();
  sub->add_option("--threads", args->threads, "Threads, 0 (all cores) to 4096")
      ->check(gt::cli::int_range(0, gt::kMaxThreads, "0 (all cores) to 4096"))
      ->capture_default_str();
  sub->callback([args, vocab_size, train_mib] {
    args->vocab_size_given = vocab_size->count() > 0;
    args->train_mib_given = train_mib->count() > 0;
    gt::cli::exit_code() = run_prepare(*args);
  });
}

gt::cli::Registrar reg(15, "prepare", setup);

}  // namespace
}  // namespace gt_cmd_prepare
