// zeromem command-line program: thin parsing and printing over the headers. Every number comes from them.
// Each subcommand lives in its own file (estimate_*.cpp, kv.cpp, plan.cpp, scenario.cpp, deepspeed.cpp,
// job.cpp, vllm.cpp).
#include "cli.hpp"

#include <algorithm>
#include <memory>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "common.hpp"

namespace zeromem::cli {

namespace {
// CLI11's help, with what a flag excludes in a stable order and shortened where long (--model and --hf-config each
// exclude the dozens of shape flags, which the default formatter printed one by one on both lines).
class compact_formatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    const auto& excluded = opt->get_excludes();
    std::string text = CLI::Formatter::make_option_opts(opt);
    if (excluded.empty()) return text;
    // CLI11 prints " Excludes: --a --b ..." last, in the order of a set of pointers, which differs from run to run:
    // here in the order of their names, and where the list is long, the alternatives named (the options that exclude
    // as many themselves, such as --hf-config for --model) and the others counted.
    const std::size_t list = text.rfind(" " + get_label("Excludes") + ":");
    if (list == std::string::npos) return text;  // an option with its own text (option_text) prints no list
    text.erase(list);
    constexpr std::size_t long_list = 4;
    std::vector<std::string> named;
    std::size_t others = 0;
    for (const CLI::Option* o : excluded)
      if (excluded.size() <= long_list || o->get_excludes().size() > long_list) named.push_back(o->get_name());
      else ++others;
    std::sort(named.begin(), named.end());
    text += " " + get_label("Excludes") + ":";
    for (const std::string& n : named) text += " " + n;
    if (others > 0) text += (named.empty() ? " " : " and ") + std::to_string(others) + " flags that name it on their own lines";
    return text;
  }
  // Descriptions wrapped at word boundaries to 90 columns; CLI11 indents each continuation line under the first.
  std::string make_option_desc(const CLI::Option* opt) const override {
    constexpr std::size_t width = 90;
    const std::string text = CLI::Formatter::make_option_desc(opt);
    std::string out;
    std::size_t line = 0;  // characters on the current output line
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t end = std::min(text.find_first_of(" \n", i), text.size());
      const std::string word = text.substr(i, end - i);
      if (line > 0 && line + 1 + word.size() > width) {
        out += '\n';
        line = 0;
      } else if (line > 0) {
        out += ' ';
        ++line;
      }
      out += word;
      line += word.size();
      if (end < text.size() && text[end] == '\n') {
        out += '\n';
        line = 0;
      }
      i = end + 1;
    }
    return out;
  }
};
}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{"zeromem: bytes per GPU, host and NVMe of LLM jobs, before launch. `zeromem COMMAND --help` lists a command's flags.",
               "zeromem"};
  app.formatter(std::make_shared<compact_formatter>());  // before the subcommands, which take their parent's
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(version_string));
  const std::vector<command> commands{add_estimate_command(app), add_kv_command(app), add_scenario_command(app), add_plan_command(app),
                                      add_deepspeed_command(app), add_job_command(app), add_vllm_command(app),
                                      add_sglang_command(app)};
  app.set_help_all_flag("--help-all", "Print every command's flags and exit");  // after the commands: theirs is --help alone
  std::string examples = "Examples (one per command):";
  for (const command& c : commands) examples += "\n  " + c.example;
  app.footer(examples + "\n\nUnits: GB = 10^9 B, GiB = 2^30 B. Sources: docs/references.md. Bad input exits 2 with one line on stderr.");
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes arguments in reverse order
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    for (const command& c : commands)
      if (app.got_subcommand(c.app)) {
        out << c.app->help();
        return 0;
      }
    out << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    for (const command& c : commands) c.add_flags();
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion&) {
    out << version_string << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    std::string sub, what = e.what();
    // A one-value flag given twice: CLI11 says "--dp: At Most 1 required but received 2" (ArgumentMismatch::AtMost).
    static const std::string at_most_one = ": At Most 1 required but received ";
    if (const std::size_t at = what.find(at_most_one); at != std::string::npos)
      what = what.substr(0, at) + " is given " + what.substr(at + at_most_one.size()) + " times; pass it once";
    for (const command& c : commands)
      if (app.got_subcommand(c.app)) {
        sub = " " + c.app->get_name();
        // An unknown option is named first, whatever else failed (a misspelt --seq-len also leaves --seq-len
        // missing), with the option it may have meant.
        for (const std::string& extra : c.app->remaining())
          if (extra.size() > 1 && extra[0] == '-' && (extra[1] < '0' || extra[1] > '9')) {
            const std::string meant = nearest_option(*c.app, extra);
            what = "unknown option " + extra + (meant.empty() ? std::string{} : "; did you mean " + meant + "?");
            break;
          }
      }
    err << "zeromem: " << one_line(what) << " (see zeromem" << sub << " --help)\n";
    return 2;
  }
  try {
    // Output is held until the command finishes, so a command that fails half-way prints only its error.
    std::ostringstream held;
    for (const command& c : commands)
      if (app.got_subcommand(c.app)) {
        const int code = c.run(held);
        out << held.str();
        return code;
      }
    return 2;  // unreachable: require_subcommand(1)
  } catch (const std::exception& e) {  // invalid_argument and overflow_error carry "zeromem: ..." already
    err << one_line(e.what()) << "\n";
    return 2;
  }
}

}  // namespace zeromem::cli
