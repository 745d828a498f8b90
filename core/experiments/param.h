// Parameter declarations and validated parameter values.
//
// One declaration per parameter drives the UI slider, the URL hash, the CLI's key=value arguments,
// the report's "params" object and the tests. Values arrive as text (from a URL, the command line
// or a slider that formats its value) and are validated here, nowhere else.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace k3 {

enum class ParamKind { integer, real, choice, flag, text };

struct ParamSpec {
    std::string key, label, unit, help;
    ParamKind kind = ParamKind::real;
    double min = 0, max = 1, def = 0;
    bool log_scale = false;
    std::vector<std::string> choices;        // choice: allowed keys; text: suggestions shown in the UI
    std::vector<std::string> choice_labels;  // display names of the choices (optional)
    std::string def_text;                    // default of choice and text parameters
    std::string group;                       // UI section heading
    // The parameter only matters when another parameter has a given value (e.g. custom model
    // dimensions when preset=custom). The UI shows it disabled otherwise.
    std::string active_key, active_value;

    // Builders: ParamSpec::integer("context", "Context", "tokens", 1, 1 << 24, 131072).log()
    static ParamSpec integer(std::string key, std::string label, std::string unit, double min, double max,
                             double def);
    static ParamSpec real(std::string key, std::string label, std::string unit, double min, double max,
                          double def);
    static ParamSpec choice(std::string key, std::string label, std::vector<std::string> choices,
                            std::string def, std::vector<std::string> labels = {});
    static ParamSpec flag(std::string key, std::string label, bool def);
    // The `seed` every stochastic module declares: the portable RNG's seed, 1 by default; its help
    // is `help` followed by kSeedHelpSuffix. With no `help`, the module's doc gives it (module_doc.h)
    // and the suffix is added there.
    static ParamSpec seed(std::string help);
    static constexpr const char* kSeedHelpSuffix =
        " The same seed gives the same report natively and in WebAssembly.";
    // Free text (a file path, say); `suggestions` are offered in the UI.
    static ParamSpec text(std::string key, std::string label, std::string def,
                          std::vector<std::string> suggestions = {});
    ParamSpec& log() {
        log_scale = true;
        return *this;
    }
    ParamSpec& describe(std::string h) {
        help = std::move(h);
        return *this;
    }
    ParamSpec& in_group(std::string g) {
        group = std::move(g);
        return *this;
    }
    ParamSpec& active_when(std::string key_, std::string value) {
        active_key = std::move(key_);
        active_value = std::move(value);
        return *this;
    }
    // Active whenever `key_` is not `value` (stored as active_value "!value").
    ParamSpec& active_unless(std::string key_, const std::string& value) {
        return active_when(std::move(key_), "!" + value);
    }
    // "engine = sglang" or "engine is not ideal": when the parameter applies, in words.
    std::string active_text() const {
        return active_value.rfind('!', 0) == 0 ? active_key + " is not " + active_value.substr(1)
                                               : active_key + " = " + active_value;
    }

    bool is_textual() const { return kind == ParamKind::choice || kind == ParamKind::text; }
    // Canonical text of a value of this parameter (numbers shortest round trip, flags 0/1).
    std::string format(double v) const;
    std::string label_of(const std::string& choice_key) const;
};

// One problem found while reading parameters. Errors refuse the value (or the run); warnings
// report an adjustment (a clamp) that was made.
struct ParamIssue {
    enum Level { warning, error } level = error;
    std::string key, message;
};

// How out-of-range numbers are treated: the UI and the URL clamp them with a warning, the CLI
// refuses them.
enum class RangePolicy { clamp, strict };

class Params {
  public:
    Params() = default;
    explicit Params(const std::vector<ParamSpec>* specs);  // all defaults

    const std::vector<ParamSpec>& specs() const { return *specs_; }
    const ParamSpec* spec(std::string_view key) const;

    // Set from text. Returns false (and adds an issue) if the value is refused; an accepted value
    // that had to be clamped adds a warning.
    bool set(std::string_view key, std::string_view text, RangePolicy policy,
             std::vector<ParamIssue>& issues);
    // Set a number directly (UI sliders); clamps to the declared range.
    void set_number(std::string_view key, double v);
    void set_text(std::string_view key, std::string v);
    void reset(std::string_view key);

    double num(std::string_view key) const;
    int64_t integer(std::string_view key) const { return int64_t(num(key)); }
    int i(std::string_view key) const { return int(num(key)); }
    bool flag(std::string_view key) const { return num(key) != 0; }
    const std::string& str(std::string_view key) const;
    // The i-th declared parameter's value (ParamList::read).
    double num_at(size_t i) const { return nums_.at(i); }
    const std::string& str_at(size_t i) const { return strs_.at(i); }

    bool is_default(std::string_view key) const;
    bool is_active(const ParamSpec& s) const;      // see ParamSpec::active_when
    std::string text(std::string_view key) const;  // canonical text of the current value
    bool operator==(const Params& o) const { return nums_ == o.nums_ && strs_ == o.strs_; }
    bool operator!=(const Params& o) const { return !(*this == o); }

  private:
    size_t index(std::string_view key) const;  // throws std::out_of_range for an undeclared key
    const std::vector<ParamSpec>* specs_ = nullptr;
    std::vector<double> nums_;
    std::vector<std::string> strs_;
};

using KeyValues = std::vector<std::pair<std::string, std::string>>;

// The first value of each key, in the order given. A key given more than once is an error naming it
// and every value (a typo or a pasted link, not a choice to make silently); `first_used` adds that the
// caller goes on with the first value, as the page does with a link.
KeyValues first_of_each(const KeyValues& kv, std::vector<ParamIssue>& issues, bool first_used);

// Parse "key=value" pairs into parameters of a declaration; collects every issue. A repeated key is an
// error under either policy; under `clamp` its first value is applied.
struct ParsedParams {
    Params params;
    std::vector<ParamIssue> issues;
    bool ok() const;  // no errors (warnings allowed)
};
ParsedParams parse_params(const std::vector<ParamSpec>& specs, const KeyValues& kv, RangePolicy policy);

}  // namespace k3
