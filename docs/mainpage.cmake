# cmake -DREADME=<README.md> -DOUTPUT=<mainpage.md> -P mainpage.cmake
# The reference's main page, from the README: its overview (everything before the first `## `
# heading) and the sections a library user reads (using the timer, using the purgatory, embedding
# it), followed by the guides. Links to docs/*.md and CHANGELOG.md become links to their pages.
file(READ "${README}" readme)

# Splits the README at its level-2 headings: `overview` holds the text before the first one.
string(FIND "${readme}" "\n## " first)
if(first EQUAL -1)
  message(FATAL_ERROR "${README}: no `## ` heading found")
endif()
string(SUBSTRING "${readme}" 0 ${first} overview)
math(EXPR first "${first} + 1")
string(SUBSTRING "${readme}" ${first} -1 rest)

set(page "${overview}\n")
foreach(wanted IN ITEMS "Using the timer" "Using the purgatory" "Embed it in your server")
  string(FIND "${rest}" "## ${wanted}\n" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${README}: the section '## ${wanted}' is gone; update docs/mainpage.cmake")
  endif()
  string(SUBSTRING "${rest}" ${at} -1 section)
  string(LENGTH "## ${wanted}\n" heading_length)
  string(SUBSTRING "${section}" ${heading_length} -1 after_heading)
  string(FIND "${after_heading}" "\n## " end)
  if(NOT end EQUAL -1)
    math(EXPR end "${end} + ${heading_length} + 1")
    string(SUBSTRING "${section}" 0 ${end} section)
  endif()
  string(APPEND page "${section}\n")
endforeach()

string(APPEND page "## Guides

- [Design](docs/design.md): the wheel, the bucket bitmap, timer bases, the task pool, the purgatory's
  check-watch-check, its locks and memory, the threading model.
- [Contracts](docs/contracts.md): every promise of a public header and the test that holds it.
- [The live view](docs/live-view.md): the demo broker's page and the snapshot API behind it.
- [Embedding](docs/embedding.md): install layouts, pkg-config, shared libraries, platforms.
- [Performance](docs/performance.md): what the benchmarks measure and what the figures mean.
- [Benchmarks](docs/benchmarks.md): every table and plot of the last report.
- [Reliability](docs/reliability.md): what is tested, and how.
- [demo_broker](docs/demo-broker.md): the Kafka apis it speaks, its options and metrics.
- [Changelog](CHANGELOG.md): what each version added and changed.

## Reference

The headers, by component: `purgatory/timer/*.hpp` (`purgatory::timer`) and `purgatory/*.hpp`
(`purgatory::purgatory`); see the Files and Classes lists. Every public class states its thread
safety in its description.
")

foreach(guide IN ITEMS docs/design docs/contracts docs/live-view docs/embedding docs/performance
                      docs/benchmarks docs/reliability docs/demo-broker CHANGELOG)
  string(REGEX REPLACE "[/-]" "_" label "md_${guide}")  # the page doxygen makes of <guide>.md
  string(REPLACE "](${guide}.md)" "](@ref ${label})" page "${page}")
endforeach()
# Doxygen's Markdown does not end a bold span after a code span: "**`timer/`**" would stay as typed.
string(REGEX REPLACE "\\*\\*`([^`]+)`\\*\\*" "<b><code>\\1</code></b>" page "${page}")
file(WRITE "${OUTPUT}.tmp" "${page}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
