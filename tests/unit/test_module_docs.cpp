// The modules' texts (core/base/markdown.h, core/experiments/module_doc.h): Markdown read into
// blocks and sections, and every module's doc complete and consistent with its declaration.
#include <doctest/doctest.h>

#include <cstring>
#include <set>

#include "core/base/markdown.h"
#include "core/experiments/module_doc.h"
#include "core/experiments/registry.h"

using namespace k3;

TEST_CASE("markdown: paragraphs and list items join their lines; headings stand alone") {
    const auto b =
        parse_markdown("# Title\n\nOne line\nand its wrap.\n\n- item one\n  continued\n- item two\n\nEnd.");
    REQUIRE(b.size() == 5);
    CHECK(b[0].kind == MdBlock::heading);
    CHECK(b[0].level == 1);
    CHECK(b[0].text == "Title");
    CHECK(b[1].text == "One line and its wrap.");
    CHECK(b[2].kind == MdBlock::bullet);
    CHECK(b[2].text == "item one continued");
    CHECK(b[3].text == "item two");
    CHECK(b[4].kind == MdBlock::paragraph);
    CHECK(markdown_plain("a\nb\n\nc") == "a b c");
}

TEST_CASE("markdown: sections by heading level") {
    const auto s = markdown_sections("# A\ntext a\n## x\nhelp x\n# B\n\ntext b\n", 1);
    REQUIRE(s.size() == 2);
    CHECK(s[0].first == "A");
    CHECK(s[0].second == "text a\n## x\nhelp x");
    CHECK(s[1].second == "text b");
    const auto sub = markdown_sections(s[0].second, 2);
    REQUIRE(sub.size() == 1);
    CHECK(sub[0].first == "x");
    CHECK(sub[0].second == "help x");
}

// A module's doc (named for its id), not a shared group's (core/modules/shared/<group>.md).
static bool is_module_doc(const std::string& name) {
    for (const Experiment& e : experiments()) {
        std::string stem = e.id;
        for (char& c : stem)
            if (c == '-') c = '_';
        if (stem == name) return true;
    }
    return false;
}

// The help of `key` in a shared group's doc when it is `help` (groups may name keys alike), or null.
static const std::string* shared_doc_help(const std::string& key, const std::string& help) {
    static const std::vector<ModuleDoc> shared = [] {
        std::vector<ModuleDoc> v;
        for (const std::string& name : module_doc_names())
            if (!is_module_doc(name)) v.push_back(module_doc(name));
        return v;
    }();
    for (const ModuleDoc& d : shared)
        for (const auto& [k, text] : d.param_help)
            if (k == key && (text == help || text + ParamSpec::kSeedHelpSuffix == help)) return &text;
    return nullptr;
}

TEST_CASE("module docs: every module has both texts, and its doc names only what it declares") {
    for (const Experiment& e : experiments()) {
        CAPTURE(e.id);
        CHECK(!e.how_it_works.empty());
        CHECK(!e.where_it_does_not_pay.empty());
        for (const ParamSpec& s : e.params) {
            CAPTURE(s.key);
            CHECK(!s.help.empty());
        }
        const ModuleDoc d = module_doc(e.id);
        CHECK(d.unknown_sections.empty());
        for (const auto& entry : d.param_help) {  // no structured binding: CAPTURE takes it in a lambda
            CAPTURE(entry.first);
            bool declared = false;
            for (const ParamSpec& s : e.params) declared |= s.key == entry.first;
            CHECK(declared);
            CHECK(!entry.second.empty());
        }
    }
}

TEST_CASE("module docs: every doc belongs to a module or is a shared group's") {
    for (const std::string& name : module_doc_names()) {
        CAPTURE(name);
        const ModuleDoc d = module_doc(name);
        CHECK(d.unknown_sections.empty());
        // A shared parameter group or report part: help only.
        if (!is_module_doc(name))
            CHECK((d.how_it_works.empty() && (!d.param_help.empty() || !d.figure_help.empty())));
    }
}

TEST_CASE("module docs: help that fits on a line stays in the code, longer help is in the doc") {
    for (const Experiment& e : experiments()) {
        const ModuleDoc d = module_doc(e.id);
        for (const ParamSpec& s : e.params) {
            const std::string* doc_help = nullptr;
            for (const auto& entry : d.param_help)
                if (entry.first == s.key) doc_help = &entry.second;
            if (!doc_help) doc_help = shared_doc_help(s.key, s.help);
            CAPTURE(e.id);
            CAPTURE(s.key);
            // The seed's standard sentence (ParamSpec::seed) does not count.
            std::string own = s.help;
            if (s.key == "seed" && own.size() >= std::strlen(ParamSpec::kSeedHelpSuffix))
                own.resize(own.size() - std::strlen(ParamSpec::kSeedHelpSuffix));
            if (doc_help) {
                // not also described in the code (a seed's standard sentence is added to the doc's)
                CHECK(s.help == (s.key == "seed" ? *doc_help + ParamSpec::kSeedHelpSuffix : *doc_help));
                CHECK(own.size() > 100);
            } else {
                CHECK(own.size() <= 100);
            }
        }
    }
}
