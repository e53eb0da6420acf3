// The catalogue keys of the dashboard's third pass (issue 35), spread into
// en.ts and ko.ts: the strings of the redesign stay in one place, so the
// lead's merge with other branches' catalogue edits stays easy.
export const ui35En = {
  "attn.overdue": "Overdue",
  "attn.needs": "Needs attention",
  "attn.due_soon": "Due within the hour",
  "ready.never_reset": "Never reset",
  "ready.never_reset_long": "Not reset to its template yet: it is as it was registered.",
  "ready.no_template": "No template",
  "ready.no_template_long": "No slot template: a reset will not re-create its database, settings or deployment.",
  "ready.no_template_reset_long": "No slot template: its reset deleted the database, env vars and volumes and force-pushed the template, but re-created nothing and deployed nothing (register the slot with a template).",
  "ready.not_healthy": "Not healthy",
  "ready.not_healthy_long": "The application is {status}, not running and healthy.",
  "ready.reset_incomplete": "Reset unfinished",
  "ready.reset_incomplete_long": "Its last reset did not finish bringing it back to the template (no healthy deployment).",
  "board.occupy_as_is": "Occupy as it is ({hours} h)",
  "board.occupy_as_is_slot": "Occupy {slot} as it is, not reset, for {hours} h",
  "board.take_next_unready": "The next free slot, {slot}, was never reset to its template: you get it as it was registered.",
  "board.took_unready": "{slot} is yours now, as it was registered: it was never reset to its template.",
  "slot.retired_note": "This slot is retired: its teardown deleted its application, database, repository and project. Nothing more can be done with it.",
  "slot.teardown_after_release": "An occupied slot cannot be torn down: release it first, then tear it down.",
} as const;

export const ui35Ko: Record<keyof typeof ui35En, string> = {
  "attn.overdue": "기한 지남",
  "attn.needs": "확인 필요",
  "attn.due_soon": "1시간 안에 기한",
  "ready.never_reset": "초기화한 적 없음",
  "ready.never_reset_long": "아직 템플릿으로 초기화하지 않았습니다. 등록했을 때 그대로입니다.",
  "ready.no_template": "템플릿 없음",
  "ready.no_template_long": "슬롯 템플릿이 없습니다. 초기화해도 데이터베이스, 설정, 배포를 다시 만들지 않습니다.",
  "ready.no_template_reset_long": "슬롯 템플릿이 없습니다. 초기화가 데이터베이스, 환경 변수, 볼륨을 지우고 템플릿을 강제 푸시했지만 아무것도 다시 만들거나 배포하지 않았습니다(템플릿과 함께 슬롯을 등록하세요).",
  "ready.not_healthy": "정상 아님",
  "ready.not_healthy_long": "애플리케이션 상태가 {status}입니다. 실행 중이고 정상인 상태가 아닙니다.",
  "ready.reset_incomplete": "초기화 미완료",
  "ready.reset_incomplete_long": "마지막 초기화가 템플릿 상태로 되돌리기를 끝내지 못했습니다(정상 배포 없음).",
  "board.occupy_as_is": "초기화 없이 점유 ({hours}시간)",
  "board.occupy_as_is_slot": "{slot}을(를) 초기화하지 않은 그대로 {hours}시간 점유",
  "board.take_next_unready": "다음 빈 슬롯 {slot}은(는) 템플릿으로 초기화한 적이 없습니다. 등록했을 때 그대로 받게 됩니다.",
  "board.took_unready": "이제 {slot}은(는) 내 슬롯입니다. 템플릿으로 초기화한 적이 없어 등록했을 때 그대로입니다.",
  "slot.retired_note": "폐기된 슬롯입니다. 철거가 애플리케이션, 데이터베이스, 저장소, 프로젝트를 삭제했습니다. 더 할 수 있는 작업이 없습니다.",
  "slot.teardown_after_release": "점유 중인 슬롯은 철거할 수 없습니다. 먼저 반납한 뒤 철거하세요.",
};
