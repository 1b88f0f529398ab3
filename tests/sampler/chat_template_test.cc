// Chat template recognition and rendering (golden strings per template).
#include <gtest/gtest.h>

#include "tokenizer/chat_template.h"

namespace trine {
namespace {

TEST(ChatTemplate, DetectsByContent) {
  ChatTemplate t;
  ASSERT_TRUE(DetectChatTemplate("{{ '<|start_header_id|>' + role }}", &t).ok());
  EXPECT_EQ(t, ChatTemplate::kLlama3);
  ASSERT_TRUE(DetectChatTemplate("{{'<|im_start|>' + message['role']}}", &t).ok());
  EXPECT_EQ(t, ChatTemplate::kChatml);
  ASSERT_TRUE(DetectChatTemplate("{{ bos_token + '[INST] ' + content }}", &t).ok());
  EXPECT_EQ(t, ChatTemplate::kLlama2);
  ASSERT_TRUE(DetectChatTemplate("{{ role + ': ' + content + '<|eot_id|>' }}{{ 'Assistant: ' }}", &t).ok());
  EXPECT_EQ(t, ChatTemplate::kBitnet);
  ASSERT_TRUE(DetectChatTemplate("", &t).ok());
  EXPECT_EQ(t, ChatTemplate::kChatml);
  EXPECT_EQ(DetectChatTemplate("{% weird %}", &t).code(), StatusCode::kUnsupported);
}

TEST(ChatTemplate, NamesParseAndUnknownFails) {
  ChatTemplate t;
  EXPECT_TRUE(ParseChatTemplateName("llama3", &t).ok());
  EXPECT_EQ(t, ChatTemplate::kLlama3);
  EXPECT_FALSE(ParseChatTemplateName("vicuna", &t).ok());
}

TEST(ChatTemplate, RendersEachTemplate) {
  const std::vector<ChatMessage> m = {{"system", "Be brief."}, {"user", "Hi "}};
  EXPECT_EQ(RenderChat(ChatTemplate::kChatml, m, 0, true, "<s>"),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi <|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(RenderChat(ChatTemplate::kLlama3, m, 0, true, "<|begin_of_text|>"),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(RenderChat(ChatTemplate::kLlama2, m, 0, true, "<s>"),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]");
  EXPECT_EQ(RenderChat(ChatTemplate::kBitnet, m, 0, true, "<|begin_of_text|>"),
            "<|begin_of_text|>System: Be brief.<|eot_id|>User: Hi<|eot_id|>Assistant: ");
}

TEST(ChatTemplate, ContinuationRendersOnlyNewMessages) {
  std::vector<ChatMessage> m = {{"user", "a"}, {"assistant", "b"}, {"user", "c"}};
  EXPECT_EQ(RenderChat(ChatTemplate::kBitnet, m, 2, true, "<|begin_of_text|>"), "User: c<|eot_id|>Assistant: ");
  EXPECT_EQ(RenderChat(ChatTemplate::kChatml, m, 2, true, ""), "<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace trine
