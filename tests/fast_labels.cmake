# Read by ctest after the discovered tests (tests/CMakeLists.txt adds it to TEST_INCLUDE_FILES):
# labels `fast` every CPU test except the slow ones below, keeping its folder label, so that
# `ctest -L fast` stays under 3 minutes on a 2-core machine (README, "Tests"). A test is slow here
# when it took more than 1.5 s in a run of the whole CPU suite on that machine (2026-11-28): whole
# training runs, method quality, lm-eval reproductions.
set(loft_slow_tests "^(MethodQuality\\.|HotTraining\\.|Finetune\\.(KilledRun|LossFalls|HaloNf4)|HotMethod\\.(EveryOption|Resume)|Decode\\.EveryMethods|Generate\\.WideRandom|ConcurrentRuns\\.|MemoryPeak\\.|RunReport\\.RealRun|QuickStart\\.|StudioTest\\.(RunStarts|OneFolder)|Llama3Checkpoint\\.Finetunes|Score\\.|Fp8Base\\.Finetune|PackingLoss\\.Packed|StreamingMemory\\.|Inspect\\.Statistics|EvaluateGsm8k\\.WideRandom|EvaluateMmlu\\.|FalqonTraining\\.|LoaderRealTokenizer\\.Gsm8k|FinetuneStop\\.)")
foreach(area @LOFT_TEST_AREAS_TEXT@)
  foreach(test IN LISTS loft_tests_${area}_TESTS)
    if(NOT test MATCHES "${loft_slow_tests}")
      set_tests_properties("${test}" PROPERTIES LABELS "${area};fast")
    endif()
  endforeach()
endforeach()

# A fresh clone (CI) has no Testing/Temporary/CTestCostData.txt, so `ctest -j` would start tests
# in the order they are listed and could leave a 500 s one for last while the other cores idle:
# the slowest start first (COST: seconds each took in CI, 2026-11-28; later runs use ctest's own
# measurements instead).
set(loft_test_costs "MethodQuality.Stories260kCpu=510" "MethodQuality.WideRandomCpu=339"
    "HotTraining.LossFallsLikeLorasOnStories260K=58" "Finetune.KilledRunResumesToTheSameMetrics=53"
    "RunReport.RealRunPageTextAndChromiumRendering=31" "Decode.EveryMethodsModelDecodes=24"
    "MemoryPeak.TokenTilesSaveWhatTheEstimateSays=21")
foreach(area @LOFT_TEST_AREAS_TEXT@)
  foreach(entry IN LISTS loft_test_costs)
    string(REPLACE "=" ";" entry "${entry}")
    list(GET entry 0 name)
    list(GET entry 1 cost)
    list(FIND loft_tests_${area}_TESTS "${name}" at)  # (ctest reads this without IN_LIST's policy)
    if(NOT at EQUAL -1)
      set_tests_properties("${name}" PROPERTIES COST ${cost})
    endif()
  endforeach()
endforeach()
