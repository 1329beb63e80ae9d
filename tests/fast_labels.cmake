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
