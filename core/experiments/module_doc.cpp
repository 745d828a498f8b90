#include "core/experiments/module_doc.h"

#include "core/base/embedded.h"
#include "core/base/markdown.h"
#include "core/experiments/module.h"

namespace k3 {

namespace docs_embedded {
extern const EmbeddedFile files[];
extern const size_t files_count;
}  // namespace docs_embedded

namespace {

std::string file_stem(std::string_view id) {
    std::string s(id);
    for (char& c : s)
        if (c == '-') c = '_';
    return s;
}

// "## a, b" gives keys a and b the same help (one figure of each design, say). Keys hold no spaces.
ModuleDoc::Entries help_entries(std::string_view section) {
    ModuleDoc::Entries out;
    for (auto& [heading, body] : markdown_sections(section, 2)) {
        const std::string help = markdown_plain(body);
        std::string key;
        for (char c : heading + ",") {
            if (c != ',') {
                if (c != ' ') key += c;
            } else if (!key.empty()) {
                out.push_back({key, help});
                key.clear();
            }
        }
    }
    return out;
}

const std::string* find_entry(const ModuleDoc::Entries& v, const std::string& key) {
    for (const auto& [k, text] : v)
        if (k == key) return &text;
    return nullptr;
}

// Gives the finished report's scalars that have no help the doc's help.
class DocumentedRun final : public Run {
  public:
    DocumentedRun(std::unique_ptr<Run> inner, std::shared_ptr<const ModuleDoc::Entries> help)
        : inner_(std::move(inner)), help_(std::move(help)) {}
    double step(double budget_ms) override {
        const double progress = inner_->step(budget_ms);
        if (progress >= 1.0 && !done_) {
            report_ = inner_->report();
            for (Scalar& s : report_.scalars)
                if (const std::string* h = find_entry(*help_, s.key); h && s.help.empty()) s.help = *h;
            done_ = true;
        }
        return progress;
    }
    const Report& report() const override { return done_ ? report_ : inner_->report(); }
    std::string stage() const override { return inner_->stage(); }

  private:
    std::unique_ptr<Run> inner_;
    std::shared_ptr<const ModuleDoc::Entries> help_;
    Report report_;
    bool done_ = false;
};

}  // namespace

std::string_view module_doc_source(std::string_view id) {
    const std::string stem = file_stem(id);
    for (size_t i = 0; i < docs_embedded::files_count; ++i)
        if (stem == docs_embedded::files[i].name)
            return {reinterpret_cast<const char*>(docs_embedded::files[i].data),
                    docs_embedded::files[i].size};
    return {};
}

std::vector<std::string> module_doc_names() {
    std::vector<std::string> out;
    for (size_t i = 0; i < docs_embedded::files_count; ++i) out.push_back(docs_embedded::files[i].name);
    return out;
}

ModuleDoc module_doc(std::string_view id) {
    ModuleDoc d;
    for (auto& [title, body] : markdown_sections(module_doc_source(id), 1)) {
        if (title == "How it works")
            d.how_it_works = body;
        else if (title == "Where it doesn't pay")
            d.where_it_does_not_pay = body;
        else if (title == "Parameters")
            d.param_help = help_entries(body);
        else if (title == "Figures")
            d.figure_help = help_entries(body);
        else
            d.unknown_sections.push_back(title);
    }
    return d;
}

std::string doc_param_help(std::string_view doc, std::string_view key) {
    const ModuleDoc d = module_doc(doc);
    const std::string* h = find_entry(d.param_help, std::string(key));
    return h ? *h : std::string();
}

std::string doc_figure_help(std::string_view doc, std::string_view key) {
    const ModuleDoc d = module_doc(doc);
    const std::string* h = find_entry(d.figure_help, std::string(key));
    return h ? *h : std::string();
}

void apply_module_doc(Experiment& e) {
    ModuleDoc d = module_doc(e.id);
    e.how_it_works = std::move(d.how_it_works);
    e.where_it_does_not_pay = std::move(d.where_it_does_not_pay);
    for (ParamSpec& s : e.params)
        if (const std::string* h = find_entry(d.param_help, s.key); h && s.help.empty())
            s.help = s.key == "seed" ? *h + ParamSpec::kSeedHelpSuffix : *h;
    if (d.figure_help.empty()) return;
    auto help = std::make_shared<const ModuleDoc::Entries>(std::move(d.figure_help));
    e.start = [start = std::move(e.start), help](const Params& raw) -> std::unique_ptr<Run> {
        return std::make_unique<DocumentedRun>(start(raw), help);
    };
}

}  // namespace k3
